"""``dataflow.WindowedAggregation`` in the real engine (``TestHarness``) against an
independent computation: any arrival order and duplicates give the same final results
within the allowed lateness, in every accumulation mode; expiry. (Late data:
``test_late_data.py``.)"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    AtExpiry,
    Combiner,
    Count,
    EachLateRecord,
    EveryProcessingTime,
    EveryRecords,
    FirstOf,
    GlobalWindows,
    Hopping,
    Pane,
    Sessions,
    Sum,
    Timing,
    Tumbling,
    Window,
    WindowAssigner,
    WindowedAggregation,
)
from millrace.dataflow._triggers import Condition, LateCondition
from millrace.dataflow._windows import parse_window

SIZE = 1_000
SPAN = 10 * SIZE


class Counts(WindowedAggregation):
    window = Tumbling(SIZE)
    aggregate = Count()
    output = "out"
    late_output = "late"


def topology(handler: str, params: dict[str, Any] | None = None) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}, "late": {}},
            "computations": {
                "agg": {
                    "handler": handler,
                    "inputs": {"in": "key"},
                    "outputs": ["out", "late"],
                    "params": params or {},
                }
            },
        }
    )


def panes(harness: TestHarness) -> list[Pane]:
    return [Pane.decode(r.value) for r in harness.outputs("out")]


def oracle(events: list[tuple[str, int, int]], window: Any, combine: str) -> dict[Any, float]:
    totals: dict[tuple[bytes, Window], float] = defaultdict(float)
    for key, ts, value in events:
        for w in window.assign(ts):
            totals[(key.encode(), w)] += 1 if combine == "count" else value
    return dict(totals)


# -- assigners ------------------------------------------------------------------------


def test_tumbling_and_hopping_windows_contain_their_times() -> None:
    assert Tumbling(1000).assign(-1) == [Window(-1000, 0)]
    assert Tumbling(1000).assign(1999) == [Window(1000, 2000)]
    hops = Hopping(1000, 250).assign(1100)
    assert len(hops) == 4 and all(w.start <= 1100 < w.end for w in hops)
    assert [w.start for w in hops] == [250, 500, 750, 1000]
    assert Sessions(300).assign(5) == [Window(5, 305)]
    assert parse_window("session:300") == Sessions(300)


# -- panes ----------------------------------------------------------------------------


def test_on_time_panes_equal_a_batch_count_and_the_window_is_collected() -> None:
    harness = TestHarness(topology(f"{__name__}:Counts"))
    events = [("a", 5, 1), ("b", 999, 1), ("a", 1000, 1), ("a", 10, 1)]
    for key, ts, _ in events:
        harness.feed("in", key.encode(), b"{}", ts)
    harness.run()
    assert panes(harness) == [], "nothing fires before the watermark passes an end"
    harness.advance_watermark(1_000)  # passes 999: the first window is complete
    got = {(p.key, p.window): p.value for p in panes(harness)}
    assert got == {(b"a", Window(0, 1000)): 2, (b"b", Window(0, 1000)): 1}
    assert all(p.timing is Timing.ON_TIME and p.index == 0 for p in panes(harness))
    assert harness.state("agg", b"a", "w:0/1000") is None, "collected once on time (no lateness)"
    harness.advance_watermark(5_000)
    assert {(p.key, p.window): p.value for p in panes(harness)} == oracle(
        events, Tumbling(SIZE), "count"
    )


def test_a_topology_configures_the_aggregation_by_params() -> None:
    params = {"window": "hopping:1000:500", "aggregate": "sum", "field": "v", "output": "out"}
    harness = TestHarness(topology("millrace.dataflow:WindowedAggregation", params))
    for ts, v in ((100, 2), (600, 3), (1_200, 4)):
        harness.feed("in", b"k", json.dumps({"v": v}).encode(), ts)
    harness.advance_watermark(10_000)
    got = {p.window: p.value for p in panes(harness)}
    assert got == {
        Window(-500, 500): 2,
        Window(0, 1000): 5,
        Window(500, 1500): 7,
        Window(1000, 2000): 4,
    }


# -- any order, any duplicates --------------------------------------------------------


events_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, SPAN - 1), st.integers(1, 9)),
    min_size=1,
    max_size=40,
)


def run_in_order(
    aggregation: type[WindowedAggregation],
    events: list[tuple[str, int, int]],
    order: list[int],
    duplicates: list[int],
    bound: int,
    *,
    clock: list[int] | None = None,
) -> list[Pane]:
    """Feed ``events`` in ``order``, then ``duplicates`` again, the watermark ``bound``
    behind the latest time fed; ``clock``: processing time to pass after each record."""
    globals()[aggregation.__name__] = aggregation
    harness = TestHarness(topology(f"{__name__}:{aggregation.__name__}"))
    ids = [f"e{i}".encode() for i in range(len(events))]
    seen = -1
    for n, i in enumerate(order + duplicates):
        key, ts, value = events[i]
        harness.feed("in", key.encode(), json.dumps({"v": value}).encode(), ts, record_id=ids[i])
        seen = max(seen, ts)
        harness.advance_watermark(seen - bound)  # out of order by up to ``bound``, and more
        if clock and clock[n % len(clock)]:
            harness.advance_processing_time(clock[n % len(clock)])
    harness.advance_watermark(MAX_TIME)  # the end of input: everything fires and expires
    assert harness.outputs("late") == [], "nothing was beyond the allowed lateness"
    return panes(harness)


def final_results(
    found: list[Pane], mode: Accumulation, *, merging: bool = False
) -> dict[tuple[bytes, Window], float]:
    results: dict[tuple[bytes, Window], float] = defaultdict(float)
    last: dict[tuple[bytes, Window], tuple[int, float]] = {}
    for pane in found:
        at = (pane.key, pane.window)
        if mode is Accumulation.DISCARDING:
            results[at] += pane.value
        elif mode is Accumulation.RETRACTING:
            results[at] += -pane.value if pane.retraction else pane.value
        if not pane.retraction and pane.index >= last.get(at, (-1, 0))[0]:
            last[at] = (pane.index, pane.value)
    if mode is Accumulation.ACCUMULATING:
        return {at: value for at, (_, value) in last.items()}
    if mode is Accumulation.RETRACTING and not merging:  # (a merged-away window nets 0)
        assert {at: value for at, (_, value) in last.items()} == dict(results)
    return dict(results)


TICK = 300
EARLY_TRIGGERS: list[Condition | None] = [
    None,
    EveryRecords(2),
    EveryProcessingTime(TICK),
    FirstOf(EveryRecords(3), EveryProcessingTime(TICK)),
]
LATE_TRIGGERS: list[LateCondition] = [
    EachLateRecord(),
    AtExpiry(),
    EveryRecords(2),
    EveryProcessingTime(TICK),
    FirstOf(EveryRecords(3), EveryProcessingTime(TICK)),
]
clocks = st.lists(st.sampled_from([0, 0, TICK // 2, TICK]), max_size=8)
"""Processing time passing between records, so clock triggers fire at varied points."""


def run_drawn(
    data: st.DataObject,
    events: list[tuple[str, int, int]],
    window: WindowAssigner,
    aggregate: Combiner,
    mode: Accumulation,
) -> list[Pane]:
    """Run an aggregation of ``events`` (field ``v``, everything within its allowed
    lateness) with a drawn arrival order, duplicate deliveries, early and late trigger
    and processing-time steps; its panes."""
    order = data.draw(st.permutations(range(len(events))))
    duplicates = data.draw(st.lists(st.sampled_from(range(len(events))), max_size=5))
    early = data.draw(st.sampled_from(EARLY_TRIGGERS))
    late = data.draw(st.sampled_from(LATE_TRIGGERS))
    clock = data.draw(clocks)

    class Drawn(WindowedAggregation):
        field = "v"
        output = "out"
        late_output = "late"
        allowed_lateness_ms = SPAN
        accumulation = mode
        trigger = AfterWatermark(early=early, late=late)

    Drawn.window, Drawn.aggregate = window, aggregate
    return run_in_order(Drawn, events, list(order), duplicates, SIZE // 2, clock=clock)


@pytest.mark.parametrize("mode", list(Accumulation))
@pytest.mark.parametrize("combine", ["count", "sum"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_strategy, data=st.data())
def test_final_results_do_not_depend_on_arrival_order_or_duplicates(
    mode: Accumulation, combine: str, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    window = data.draw(st.sampled_from([Tumbling(SIZE), Hopping(SIZE, SIZE // 4), GlobalWindows()]))
    found = run_drawn(data, events, window, Count() if combine == "count" else Sum(), mode)
    assert final_results(found, mode) == oracle(events, window, combine)
    on_time = Counter(
        (p.key, p.window) for p in found if p.timing is Timing.ON_TIME and not p.retraction
    )
    assert all(n == 1 for n in on_time.values()), "at most one on-time pane a window"
    assert {(p.key, p.window) for p in found} == set(oracle(events, window, combine))


# -- sessions ---------------------------------------------------------------------------

GAP = 300


def session_oracle(events: list[tuple[str, int, int]], combine: str) -> dict[Any, float]:
    """Sessions by a sorted pass: a record at ``t`` opens ``[t, t + GAP)``; overlapping
    windows are one session."""
    sessions: dict[tuple[bytes, Window], float] = {}
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, ts, value in events:
        by_key[key].append((ts, value))
    for key, items in by_key.items():
        items.sort()
        start, end, total = items[0][0], items[0][0] + GAP, 0.0
        for ts, value in items:
            if ts >= end:
                sessions[(key.encode(), Window(start, end))] = total
                start, end, total = ts, ts + GAP, 0.0
            end = max(end, ts + GAP)
            total += 1 if combine == "count" else value
        sessions[(key.encode(), Window(start, end))] = total
    return sessions


@pytest.mark.parametrize("mode", list(Accumulation))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_strategy, data=st.data())
def test_sessions_merge_to_the_same_results_in_any_order(
    mode: Accumulation, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    found = run_drawn(data, events, Sessions(GAP), Sum(), mode)
    assert_merged_results(found, session_oracle(events, "sum"), mode)


def assert_merged_results(
    found: list[Pane], expected: dict[tuple[bytes, Window], float], mode: Accumulation
) -> None:
    """Panes of merging windows add up to ``expected`` (final window -> total): the
    panes of windows merged away count towards the final window that contains them."""
    if mode is Accumulation.RETRACTING:
        net = {at: v for at, v in final_results(found, mode, merging=True).items() if v}
        assert net == {at: v for at, v in expected.items() if v}
        return
    totals: dict[tuple[bytes, Window], float] = defaultdict(float)
    last: dict[tuple[bytes, Window], tuple[int, float]] = {}
    for pane in found:
        [session] = [
            w for (k, w) in expected if k == pane.key and w.start <= pane.window.start
            and pane.window.end <= w.end
        ]  # fmt: skip
        at = (pane.key, session)
        totals[at] += pane.value
        if pane.window == session and pane.index >= last.get(at, (-1, 0))[0]:
            last[at] = (pane.index, pane.value)
    if mode is Accumulation.DISCARDING:
        assert dict(totals) == expected
    else:
        assert {at: v for at, (_, v) in last.items()} == expected


class EarlyByClock(WindowedAggregation):
    window = Tumbling(SIZE)
    output = "out"
    late_output = "late"
    trigger = AfterWatermark(early=EveryProcessingTime(500))
    accumulation = Accumulation.ACCUMULATING


def test_early_panes_every_interval_of_processing_time() -> None:
    harness = TestHarness(topology(f"{__name__}:EarlyByClock"))
    harness.feed("in", b"a", b"{}", 10)
    harness.feed("in", b"a", b"{}", 20)
    harness.run()
    harness.advance_processing_time(499)
    assert panes(harness) == []
    harness.advance_processing_time(1)
    assert [(p.timing, p.value) for p in panes(harness)] == [(Timing.EARLY, 2)]
    harness.advance_processing_time(5_000)  # nothing new: no pane
    harness.feed("in", b"a", b"{}", 30)
    harness.run()
    harness.advance_processing_time(500)
    harness.advance_watermark(1_000)
    harness.advance_processing_time(5_000)  # the on-time pane cancelled the clock
    timings = [(p.timing, p.index, p.value) for p in panes(harness)]
    assert timings == [(Timing.EARLY, 0, 2), (Timing.EARLY, 1, 3), (Timing.ON_TIME, 2, 3)]


def test_a_window_expiring_at_its_end_still_fires_on_time() -> None:
    """A global window's expiry clamps to its last instant: the expiry timer (due with
    the on-time timer) emits the on-time pane first, then drops the window."""
    params = {"window": "global", "aggregate": "count", "output": "out",
              "allowed_lateness_ms": 60_000}  # fmt: skip
    harness = TestHarness(topology("millrace.dataflow:WindowedAggregation", params))
    harness.feed_many("in", [(b"a", b"{}", 5), (b"a", b"{}", 7)])
    harness.advance_watermark(MAX_TIME)
    assert [(p.timing, p.value) for p in panes(harness)] == [(Timing.ON_TIME, 2)]
    assert harness.state("agg", b"a", f"w:{GlobalWindows().assign(0)[0].tag()}") is None
