"""Panes and joins' outputs are strict JSON (issue 30: a float sum that overflowed was
written as ``Infinity``, which strict JSON parsers refuse); a non-finite float in a pane
comes back as itself."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations.testing import TestHarness
from millrace.dataflow import Pane, TableJoin, Window
from millrace.dataflow._panes import Timing
from tests.dataflow.test_tables import topology as table_topology
from tests.dataflow.test_windowed_aggregation import topology


def strict_loads(data: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(data, parse_constant=refuse)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


def leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_value_is_strict_json_and_reads_back(value: Any) -> None:
    pane = Pane(b"k", Window(0, 10), 0, Timing.ON_TIME, value)
    encoded = pane.encode()
    strict_loads(encoded)
    found = leaves(value)
    nonfinite = any(isinstance(x, float) and not math.isfinite(x) for x in found)
    spelled = any(x in ("Infinity", "-Infinity", "NaN") for x in found)
    if nonfinite and spelled:
        return  # documented: a marked pane reads those strings as floats too
    assert same(Pane.decode(encoded).value, value)


def test_an_overflowing_float_sum_is_a_strict_pane() -> None:
    params = {"window": "tumbling:1000", "aggregate": "sum", "field": "v", "output": "out"}
    harness = TestHarness(topology("millrace.dataflow:WindowedAggregation", params))
    for ts in (100, 200):
        harness.feed("in", b"k", json.dumps({"v": 1e308}).encode(), ts)
    harness.advance_watermark(5_000)
    [output] = harness.outputs("out")
    body = strict_loads(output.value)
    assert (body["value"], body["nonfinite"]) == ("Infinity", True)
    assert Pane.decode(output.value).value == math.inf


class StrictJoin(TableJoin):
    stream = "orders"
    table = "customers"
    output = "enriched"


def test_a_join_with_rows_holding_non_finite_floats_is_strict_json() -> None:
    harness = TestHarness(table_topology(f"{__name__}:StrictJoin"))
    harness.feed("customers", b"a", b'{"x": NaN, "y": [Infinity, 1.5]}', 1)
    harness.run()
    harness.feed("orders", b"a", b"order", 2)
    harness.run()
    [output] = harness.outputs("enriched")
    assert strict_loads(output.value)["row"] == {"x": "NaN", "y": ["Infinity", 1.5]}
