"""Sliding windows in DDIA's sense (``Sliding(span)``: per key, one window per distinct
event time ``t`` holding the events in ``(t - span, t]``) in the real engine
(``TestHarness``), against a direct computation over all events: any arrival order and
duplicates, every accumulation mode and trigger; late records and state collection."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import JSON
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    LATE_DROPPED,
    Accumulation,
    AfterWatermark,
    Count,
    EveryRecords,
    Sliding,
    Sum,
    Timing,
    Window,
    WindowedAggregation,
)
from millrace.dataflow._windows import parse_window
from tests.dataflow.test_windowed_aggregation import (
    SPAN,
    final_results,
    panes,
    run_drawn,
    topology,
)

WIDTH = 1_500
STEP = 250
times = st.one_of(st.integers(0, 12).map(lambda n: n * STEP), st.integers(0, SPAN - 1))
"""Event times, often on a grid so that events exactly a span apart (or one ms less)
are common: both edges of ``(t - span, t]`` are tested."""
sliding_events = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), times, st.integers(1, 9)), min_size=1, max_size=40
)


def sliding_oracle(
    events: list[tuple[str, int, int]], span: int, combine: str
) -> dict[tuple[bytes, Window], float]:
    """For every key and distinct event time ``t``, the aggregate of the key's events in
    ``(t - span, t]``, by a scan of all of them."""
    results: dict[tuple[bytes, Window], float] = {}
    for key, t, _ in events:
        results[(key.encode(), Window(t - span + 1, t + 1))] = sum(
            1 if combine == "count" else value
            for other, ts, value in events
            if other == key and t - span < ts <= t
        )
    return results


class SlidingCounts(WindowedAggregation):
    window = Sliding(WIDTH)
    aggregate = Count()
    allowed_lateness_ms = SPAN
    output = "out"
    late_output: str | None = "late"


def feed(harness: TestHarness, times: list[int], key: bytes = b"a") -> None:
    for ts in times:
        harness.feed("in", key, b"{}", ts)
    harness.run()


def test_events_less_than_a_span_apart_share_the_window_of_the_later_one() -> None:
    """DDIA's example: 10:03:39 and 10:08:12 are in one 5-minute sliding window."""
    minute = 60_000
    first, second = (3 * 60 + 39) * 1000, (8 * 60 + 12) * 1000
    assert Sliding(5 * minute).assign(second) == [Window(second - 5 * minute + 1, second + 1)]
    assert parse_window("sliding:300000") == Sliding(5 * minute)

    class FiveMinutes(SlidingCounts):
        window = Sliding(5 * minute)

    globals()["FiveMinutes"] = FiveMinutes
    harness = TestHarness(topology(f"{__name__}:FiveMinutes"))
    feed(harness, [second, first, second + 5 * minute])
    harness.advance_watermark(20 * minute)
    got = {p.window: p.value for p in panes(harness)}
    assert got == {
        Window(first - 5 * minute + 1, first + 1): 1,
        Window(second - 5 * minute + 1, second + 1): 2,  # both
        Window(second + 1, second + 5 * minute + 1): 1,  # exactly a span later: alone
    }


def test_each_distinct_time_has_one_window_firing_when_the_watermark_passes_it() -> None:
    globals()["SlidingCounts"] = SlidingCounts
    harness = TestHarness(topology(f"{__name__}:SlidingCounts"))
    feed(harness, [500, 100, 1_700, 500])
    harness.advance_watermark(500)
    assert [(p.window, p.value) for p in panes(harness)] == [(Window(-1399, 101), 1)]
    harness.advance_watermark(501)
    harness.advance_watermark(5_000)
    got = [(p.window, p.value, p.timing) for p in panes(harness)]
    assert got == [
        (Window(-1399, 101), 1, Timing.ON_TIME),
        (Window(-999, 501), 3, Timing.ON_TIME),  # 100 and both at 500
        (Window(201, 1701), 3, Timing.ON_TIME),  # both at 500, and 1700 (not 100)
    ]


@pytest.mark.parametrize("order", [[0, 249, 250], [250, 249, 0], [249, 250, 0]])
def test_a_window_holds_events_less_than_a_span_before_its_time(order: list[int]) -> None:
    class Span250(SlidingCounts):
        window = Sliding(250)

    globals()["Span250"] = Span250
    harness = TestHarness(topology(f"{__name__}:Span250"))
    feed(harness, order)
    harness.advance_watermark(1_000)
    got = {p.window.end - 1: p.value for p in panes(harness)}
    assert got == {0: 1, 249: 2, 250: 2}  # 249 - 0 < 250 <= 250 - 0


def test_a_record_updates_the_later_windows_in_reach_with_late_panes() -> None:
    globals()["SlidingCounts"] = SlidingCounts
    harness = TestHarness(topology(f"{__name__}:SlidingCounts"))
    feed(harness, [1_000, 2_000, 3_000])
    harness.advance_watermark(2_500)
    feed(harness, [600])  # joins W_1000 and W_2000 (fired: late panes), opens W_600
    harness.advance_watermark(3_001)
    got = [(p.window.end - 1, p.index, p.timing, p.value) for p in panes(harness)]
    assert got == [
        (1_000, 0, Timing.ON_TIME, 1),
        (2_000, 0, Timing.ON_TIME, 2),
        (600, 0, Timing.LATE, 1),  # opened after the watermark passed 600: late panes only
        (1_000, 1, Timing.LATE, 1),  # discarding: what the late record added
        (2_000, 1, Timing.LATE, 1),
        (3_000, 0, Timing.ON_TIME, 2),  # 2000 and 3000; 600 is a span before
    ]
    assert harness.outputs("late") == []


def test_a_record_whose_own_window_expired_changes_nothing_and_is_reported() -> None:
    class Strict(SlidingCounts):
        allowed_lateness_ms = 100
        late_output = None

    globals()["Strict"] = Strict
    harness = TestHarness(topology(f"{__name__}:Strict"))
    feed(harness, [1_000])
    harness.advance_watermark(300)
    feed(harness, [150])  # W_150 expired at 250, though W_1000 (which it is in) is open
    harness.advance_watermark(5_000)
    assert [(p.window.end - 1, p.value) for p in panes(harness)] == [(1_000, 1)]
    assert harness.state("agg", b"a", LATE_DROPPED, JSON) == 1


def test_buckets_and_windows_are_collected_when_no_window_can_take_them() -> None:
    globals()["SlidingCounts"] = SlidingCounts
    harness = TestHarness(topology(f"{__name__}:SlidingCounts"))
    feed(harness, [100, 200])
    assert harness.state("agg", b"a", "slides", JSON) == [100, 200]
    assert harness.state("agg", b"a", "b:100", JSON) == {"acc": 1, "n": 1}
    harness.advance_watermark(100 + WIDTH - 1 + SPAN)  # bucket 100 is still needed
    assert harness.state("agg", b"a", "b:100", JSON) is not None
    harness.advance_watermark(100 + WIDTH + SPAN)
    assert harness.state("agg", b"a", "b:100", JSON) is None
    assert harness.state("agg", b"a", "slides", JSON) == [200]
    harness.advance_watermark(10 * SPAN)
    assert harness.state("agg", b"a", "slides", JSON) is None
    assert harness.state("agg", b"a", "w:-1299/201", JSON) is None


def test_early_panes_count_the_records_a_new_window_starts_with() -> None:
    class EarlySliding(SlidingCounts):
        trigger = AfterWatermark(early=EveryRecords(3))
        accumulation = Accumulation.ACCUMULATING

    globals()["EarlySliding"] = EarlySliding
    harness = TestHarness(topology(f"{__name__}:EarlySliding"))
    feed(harness, [100, 200])
    assert panes(harness) == []
    feed(harness, [300])  # W_300 opens holding 100 and 200: three records, one pane
    assert [(p.window.end - 1, p.timing, p.value) for p in panes(harness)] == [
        (300, Timing.EARLY, 3)
    ]


@pytest.mark.parametrize("mode", list(Accumulation))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=sliding_events, data=st.data())
def test_sliding_windows_equal_a_scan_in_any_order(
    mode: Accumulation, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    combine = data.draw(st.sampled_from(["count", "sum"]))
    span = data.draw(st.sampled_from([1, STEP, STEP + 1, 4 * STEP, WIDTH]))
    aggregate = Count() if combine == "count" else Sum()
    found = run_drawn(data, events, Sliding(span), aggregate, mode)
    expected: dict[Any, float] = sliding_oracle(events, span, combine)
    assert final_results(found, mode) == expected
    on_time = Counter(
        (p.key, p.window) for p in found if p.timing is Timing.ON_TIME and not p.retraction
    )
    assert all(n == 1 for n in on_time.values()), "at most one on-time pane a window"


def test_a_topology_declares_sliding_windows_by_params() -> None:
    params = {"window": "sliding:1000", "aggregate": "sum", "field": "v", "output": "out"}
    harness = TestHarness(topology("millrace.dataflow:WindowedAggregation", params))
    for ts, v in ((100, 2), (600, 3), (1_200, 4)):
        harness.feed("in", b"k", json.dumps({"v": v}).encode(), ts)
    harness.advance_watermark(10_000)
    got = {p.window.end - 1: p.value for p in panes(harness)}
    assert got == {100: 2, 600: 5, 1_200: 7}
