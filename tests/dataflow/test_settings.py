"""A library computation's settings are read strictly, when the topology loads: a typo in
``params`` or on a subclass, a bad value, an output the computation does not declare:
each a ``TopologyError`` naming the computation and the setting meant (issue 36)."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.computations import Topology, TopologyError
from millrace.dataflow import IntervalJoin, Sessions, WindowedAggregation


class Misspelled(WindowedAggregation):
    windw = Sessions(60_000)
    output = "out"


class MisspelledJoin(IntervalJoin):
    left, right, output = "in", "other", "out"
    allowed_latenes_ms = 5_000


class Fine(WindowedAggregation):
    """Attributes of its own that are no setting's near miss are the user's business."""

    output = "out"
    thresholds = (1, 2, 3)


def load(handler: object, params: dict[str, Any], outputs: tuple[str, ...] = ("out",)) -> Topology:
    return Topology.from_dict({
        "streams": {"in": {}, "other": {}, "out": {}, "late": {}},
        "computations": {"c": {"handler": handler, "inputs": {"in": "key", "other": "key"},
                               "outputs": list(outputs), "params": params}},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("handler", "params", "outputs", "message"),
    [
        ("millrace.dataflow:WindowedAggregation", {"windw": "tumbling:1m", "output": "out"},
         ("out",),
         "computation 'c' (WindowedAggregation): WindowedAggregation has no setting 'windw' "
         "(did you mean 'window'?)"),
        ("millrace.dataflow:IntervalJoin", {"left": "in", "right": "other", "output": "out",
                                            "uper_ms": 5}, ("out",), "did you mean 'upper_ms'?"),
        (Misspelled, {}, ("out",), "Misspelled.windw is not a setting of Misspelled (did you "
                                   "mean 'window'?)"),
        (MisspelledJoin, {}, ("out",), "MisspelledJoin.allowed_latenes_ms is not a setting"),
        ("millrace.dataflow:WindowedAggregation", {"window": "tumbling:1 minute", "output": "out"},
         ("out",), "computation 'c' (WindowedAggregation): window 'tumbling:1 minute'"),
        ("millrace.dataflow:WindowedAggregation", {"output": "elsewhere"}, ("out",),
         "computation 'c': output 'elsewhere' is not one of its outputs ['out']"),
        ("millrace.dataflow:WindowedAggregation", {"output": "out", "late_output": "late"},
         ("out",),
         "late_output 'late' is not one of its outputs"),
        ("millrace.dataflow:Map", {"fn": "no.such:function", "output": "out"}, ("out",),
         "fn 'no.such:function' cannot be imported"),
    ],
    ids=["params typo", "join params typo", "subclass typo", "subclass join typo",
         "bad duration", "undeclared output", "undeclared late output", "missing function"],
)  # fmt: skip
def test_a_bad_setting_is_an_error_of_the_topology_naming_it(
    handler: object, params: dict[str, Any], outputs: tuple[str, ...], message: str
) -> None:
    with pytest.raises(TopologyError) as raised:
        load(handler, params, outputs)
    assert message in str(raised.value)


def test_good_settings_and_other_attributes_load() -> None:
    load(Fine, {"window": "session:5m", "allowed_lateness_ms": "1h"})
    load(
        "millrace.dataflow:WindowedAggregation",
        {"output": "out", "late_output": "late"},
        ("out", "late"),
    )
