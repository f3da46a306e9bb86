"""JSON values drawn by hypothesis, and their comparison (for the serde tests)."""

from __future__ import annotations

import math
from typing import Any

import hypothesis.strategies as st

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()


def json_values_of(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``scalars`` and lists and objects of them, nested."""
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )


json_values = json_values_of(json_scalars)
"""What ``json.loads`` can give (any float, NaN and infinities included)."""


def same_json_value(left: Any, right: Any) -> bool:
    """Equal in type and value, counting NaN equal to NaN."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same_json_value, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_json_value(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right
