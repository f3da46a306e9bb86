"""``JSON`` (the state and production serde) encodes and decodes exactly as
``json.dumps(separators=(",", ":"), sort_keys=True)`` and ``json.loads`` do; it only
reuses CPython's C encoder and scanner instead of building them per call."""

from __future__ import annotations

import json
import math
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from computations import JSON

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _same(left: Any, right: Any) -> bool:
    """Equal, counting NaN equal to NaN."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


@settings(max_examples=300)
@given(value=values)
def test_json_serde_is_json_dumps_and_loads(value: Any) -> None:
    encoded = JSON.dumps(value)
    assert encoded == json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    assert _same(JSON.loads(encoded), json.loads(encoded))


def test_json_serde_reads_what_json_loads_reads() -> None:
    for raw in [b" 5 ", b"\xef\xbb\xbf{}", '{"a": 1}'.encode("utf-16"), b"NaN", b'"\\ud800"']:
        assert _same(JSON.loads(raw), json.loads(raw))
    for bad in [b"{bad", b"12 x", b""]:
        for parse in (JSON.loads, json.loads):
            try:
                parse(bad)
            except ValueError:
                continue
            raise AssertionError(f"{parse} read {bad!r}")
