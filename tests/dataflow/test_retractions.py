"""A retracting stream consumed downstream stays exact: per-user session counts (sessions
merge as out-of-order records bridge them) feed a histogram of session lengths, which
must equal an independent batch computation for any arrival order."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    Count,
    Max,
    Pane,
    Sessions,
    Tumbling,
    WindowedAggregation,
)
from tests.dataflow.test_windowed_aggregation import GAP, SIZE, SPAN, session_oracle


class SessionLengths(WindowedAggregation):
    """Records per user session, retracting: a merge retracts the sessions it replaces."""

    window = Sessions(GAP)
    aggregate = Count()
    allowed_lateness_ms = SPAN
    accumulation = Accumulation.RETRACTING
    output = "lengths"
    late_output = "late"


class LengthHistogram(WindowedAggregation):
    """Sessions per length (keyed by the length), applying the retractions it reads."""

    window = Tumbling(20 * SPAN)
    aggregate = Count()
    input_panes = True
    allowed_lateness_ms = 2 * SPAN
    accumulation = Accumulation.ACCUMULATING
    output = "histogram"


def two_stages() -> Topology:
    return Topology.from_dict(
        {
            "streams": {"clicks": {}, "lengths": {}, "histogram": {}, "late": {}},
            "computations": {
                "sessions": {
                    "handler": f"{__name__}:SessionLengths",
                    "inputs": {"clicks": "key"},
                    "outputs": ["lengths", "late"],
                },
                "histogram": {
                    "handler": f"{__name__}:LengthHistogram",
                    "inputs": {"lengths": "json:value"},
                    "outputs": ["histogram"],
                },
            },
        }
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, SPAN - 1)),
        min_size=1,
        max_size=40,
    ),
    data=st.data(),
)
def test_a_histogram_of_merging_sessions_equals_a_batch_computation(
    events: list[tuple[str, int]], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(range(len(events))))
    harness = TestHarness(two_stages())
    seen = -1
    for i in order:
        key, ts = events[i]
        harness.feed("clicks", key.encode(), b"{}", ts, record_id=f"e{i}".encode())
        seen = max(seen, ts)
        harness.advance_watermark(seen - SIZE // 2)
    harness.advance_watermark(40 * SPAN)
    assert harness.outputs("late") == []
    last: dict[bytes, tuple[int, int]] = {}
    for record in harness.outputs("histogram"):
        pane = Pane.decode(record.value)
        if pane.index >= last.get(pane.key, (-1, 0))[0]:
            last[pane.key] = (pane.index, pane.value)
    got = {json.loads(key): count for key, (_, count) in last.items() if count}
    lengths = session_oracle([(k, ts, 1) for k, ts in events], "count").values()
    assert got == dict(Counter(int(n) for n in lengths))


def test_an_aggregate_that_cannot_retract_refuses_a_pane_input() -> None:
    class MaxOfPanes(WindowedAggregation):
        aggregate = Max()
        input_panes = True
        output = "out"

    with pytest.raises(ValueError, match="cannot retract"):
        MaxOfPanes().setup({})
