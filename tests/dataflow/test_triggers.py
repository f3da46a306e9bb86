"""Composite and batched triggers: ``FirstOf`` early panes, late panes every N records
or every interval of processing time with the rest flushed at expiry, and how topology
``params`` declare them. (Order independence of their final results is a property in
``test_windowed_aggregation.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    AtExpiry,
    EachLateRecord,
    EveryProcessingTime,
    EveryRecords,
    FirstOf,
    Timing,
    Tumbling,
    WindowedAggregation,
)
from millrace.dataflow._triggers import Firing, LateCondition, firing, parse_trigger
from tests.dataflow.test_windowed_aggregation import SIZE, panes, topology


def aggregation(
    trigger: AfterWatermark, mode: Accumulation = Accumulation.DISCARDING
) -> TestHarness:
    class Triggered(WindowedAggregation):
        window = Tumbling(SIZE)
        allowed_lateness_ms = 2_000
        output = "out"
        late_output = "late"

    Triggered.trigger, Triggered.accumulation = trigger, mode
    globals()["Triggered"] = Triggered
    return TestHarness(topology(f"{__name__}:Triggered"))


def feed(harness: TestHarness, *times: int) -> None:
    for ts in times:
        harness.feed("in", b"a", b"{}", ts)
        harness.run()


def timings(harness: TestHarness) -> list[tuple[Timing, int, Any]]:
    return [(p.timing, p.index, p.value) for p in panes(harness)]


def test_first_of_fires_on_the_count_or_the_clock_whichever_comes_first() -> None:
    early = FirstOf(EveryRecords(3), EveryProcessingTime(500))
    harness = aggregation(AfterWatermark(early=early), Accumulation.ACCUMULATING)
    feed(harness, 10, 20)  # the clock starts at 0
    harness.advance_processing_time(400)
    feed(harness, 30)  # the third record: a pane, and the clock starts over ...
    assert timings(harness) == [(Timing.EARLY, 0, 3)]
    feed(harness, 40)  # ... at the next record, 400
    harness.advance_processing_time(499)
    assert len(panes(harness)) == 1
    harness.advance_processing_time(1)  # 500 ms after the first record since the pane
    harness.advance_processing_time(5_000)  # nothing new since: no pane
    harness.advance_watermark(1_000)
    assert timings(harness) == [
        (Timing.EARLY, 0, 3),
        (Timing.EARLY, 1, 4),
        (Timing.ON_TIME, 2, 4),
    ]


def test_batched_late_panes_flush_the_rest_when_the_window_expires() -> None:
    harness = aggregation(AfterWatermark(late=EveryRecords(2)))
    feed(harness, 10)
    harness.advance_watermark(1_000)
    feed(harness, 20, 30, 40)
    assert timings(harness) == [(Timing.ON_TIME, 0, 1), (Timing.LATE, 1, 2)]
    harness.advance_watermark(999 + 2_000)  # the window's last instant plus the lateness
    assert len(panes(harness)) == 2
    harness.advance_watermark(3_000)  # expired: the one late record not yet in a pane
    assert timings(harness)[2:] == [(Timing.LATE, 2, 1)]
    assert harness.state("agg", b"a", "w:0/1000") is None


def test_late_panes_by_processing_time_and_at_expiry() -> None:
    late = FirstOf(EveryRecords(3), EveryProcessingTime(500))
    harness = aggregation(AfterWatermark(late=late), Accumulation.ACCUMULATING)
    feed(harness, 10)
    harness.advance_watermark(1_000)
    feed(harness, 20)
    harness.advance_processing_time(500)
    feed(harness, 30, 40, 50)  # three late records: a pane before the clock
    feed(harness, 60)
    harness.advance_watermark(3_000)  # expires before the clock: flushed
    harness.advance_processing_time(10_000)
    assert timings(harness) == [
        (Timing.ON_TIME, 0, 1),
        (Timing.LATE, 1, 2),
        (Timing.LATE, 2, 5),
        (Timing.LATE, 3, 6),
    ]


@pytest.mark.parametrize("late", [EachLateRecord(), EveryRecords(1)])
def test_each_late_record_is_every_record(late: LateCondition) -> None:
    harness = aggregation(AfterWatermark(late=late))
    feed(harness, 10)
    harness.advance_watermark(1_000)
    feed(harness, 20, 30)
    harness.advance_watermark(5_000)
    assert timings(harness) == [(Timing.ON_TIME, 0, 1), (Timing.LATE, 1, 1), (Timing.LATE, 2, 1)]


def test_at_expiry_is_one_late_pane() -> None:
    harness = aggregation(AfterWatermark(late=AtExpiry()))
    feed(harness, 10)
    harness.advance_watermark(1_000)
    feed(harness, 20, 30)
    harness.advance_watermark(5_000)
    assert timings(harness) == [(Timing.ON_TIME, 0, 1), (Timing.LATE, 1, 2)]


def test_conditions_reduce_to_the_smallest_count_and_interval() -> None:
    nested = FirstOf(EveryRecords(3), FirstOf(EveryRecords(2), EveryProcessingTime(7)))
    assert firing(nested) == Firing(count=2, interval_ms=7)
    assert firing(EachLateRecord()) == Firing(count=1)
    assert firing(AtExpiry()) == firing(None) == Firing()
    with pytest.raises(ValueError):
        FirstOf()
    with pytest.raises(TypeError):
        FirstOf(AtExpiry())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        AfterWatermark(early=EachLateRecord())  # type: ignore[arg-type]


def test_params_declare_composite_and_batched_triggers() -> None:
    both = {"early_every_records": 100, "early_every_ms": 60_000}
    assert parse_trigger(both) == AfterWatermark(
        early=FirstOf(EveryRecords(100), EveryProcessingTime(60_000))
    )
    assert parse_trigger({"late_every_records": 5}).late == EveryRecords(5)
    assert parse_trigger({"late_every_records": 5, "late_every_ms": 9}).late == FirstOf(
        EveryRecords(5), EveryProcessingTime(9)
    )
    assert parse_trigger({"late": "at_expiry"}) == AfterWatermark(late=AtExpiry())
    assert parse_trigger({"early_every_records": 0}) == AfterWatermark()
    with pytest.raises(ValueError, match="choose one"):
        parse_trigger({"late": "each", "late_every_ms": 5})
    with pytest.raises(ValueError, match="at_expiry"):
        parse_trigger({"late": "sometimes"})
    params = {"output": "out", "early_every_records": 2, "early_every_ms": 500, "late": "each"}
    harness = TestHarness(topology("millrace.dataflow:WindowedAggregation", params))
    feed(harness, 10, 20)
    assert timings(harness) == [(Timing.EARLY, 0, 2)]
