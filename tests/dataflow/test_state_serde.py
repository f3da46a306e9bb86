"""Window state of built-in combiners is encoded by msgspec (``dataflow/_state_serde.py``):
every plain value reads back as what ``JSON`` would have read back, whichever of the
two wrote it, and a combiner that does not promise plain accumulators keeps ``JSON``."""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from millrace.computations import JSON
from millrace.dataflow import Combiner, Count, Sum, WindowedAggregation
from millrace.dataflow._combiners import Combined
from millrace.dataflow._state_serde import PLAIN_STATE
from tests.support.json_values import json_scalars, json_values_of, same_json_value

plain_values = json_values_of(
    json_scalars | st.text(alphabet=st.characters(categories=["Cs", "Lu", "Cc"]))
)
"""JSON values, strings with lone surrogates and control characters among them."""


@settings(max_examples=400)
@given(value=plain_values)
def test_plain_state_reads_back_as_json_state_does(value: Any) -> None:
    reference = json.loads(json.dumps(value))
    assert same_json_value(PLAIN_STATE.loads(PLAIN_STATE.dumps(value)), reference)
    # State written by the previous code is read, and what is written now it reads.
    assert same_json_value(PLAIN_STATE.loads(JSON.dumps(value)), reference)
    assert same_json_value(JSON.loads(PLAIN_STATE.dumps(value)), reference)


def test_nan_and_infinities_are_written_as_json_writes_them() -> None:
    state = {"acc": [float("nan"), float("inf"), -float("inf")], "since": 3}
    assert PLAIN_STATE.dumps(state) == JSON.dumps(state)


def test_what_json_refuses_is_refused_unless_msgspec_encodes_it() -> None:
    """Not plain: only for combiners that promise plain accumulators."""
    assert PLAIN_STATE.dumps({"acc": "\ud800"}) == JSON.dumps({"acc": "\ud800"})
    for value in ({1: 2}, {"a": object()}):
        try:
            JSON.dumps(value)
        except TypeError:
            continue
        assert PLAIN_STATE.dumps(value) == JSON.dumps(value)


class _UserCombiner(Combiner):
    def create(self) -> Any:
        return 0

    def add(self, accumulator: Any, value: float) -> Any:
        return accumulator + value

    def merge(self, left: Any, right: Any) -> Any:
        return left + right


def test_built_in_combiners_use_msgspec_and_user_combiners_json() -> None:
    built_in = WindowedAggregation()
    built_in.aggregate = Combined({"count": Count(), "sum": Sum()})
    assert built_in.state_serde is PLAIN_STATE
    user = WindowedAggregation()
    user.aggregate = _UserCombiner()
    assert user.state_serde is JSON
    mixed = WindowedAggregation()
    mixed.aggregate = Combined({"count": Count(), "mine": _UserCombiner()})
    assert mixed.state_serde is JSON
