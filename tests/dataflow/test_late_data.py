"""Late data in ``dataflow.WindowedAggregation``: records behind the watermark by more
than the allowed lateness miss their expired windows, change no result, and are never
lost silently (the late stream, or the key's ``late_dropped`` count)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import JSON, MAX_TIME
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    LATE_DROPPED,
    Accumulation,
    AfterWatermark,
    EveryRecords,
    Hopping,
    Sum,
    Tumbling,
    Window,
    WindowedAggregation,
)
from tests.dataflow.test_windowed_aggregation import (
    SIZE,
    SPAN,
    Counts,
    events_strategy,
    final_results,
    panes,
    topology,
)


def test_records_after_expiry_go_to_the_late_stream_and_change_nothing() -> None:
    harness = TestHarness(topology(f"{Counts.__module__}:Counts"))
    harness.feed("in", b"a", b"{}", 100)
    harness.advance_watermark(2_000)
    harness.feed("in", b"a", b"late", 200)
    harness.feed("in", b"a", b"{}", 2_500)
    harness.advance_watermark(5_000)
    assert [(r.key, r.value, r.event_time_ms) for r in harness.outputs("late")] == [
        (b"a", b"late", 200)
    ]
    got = {p.window: p.value for p in panes(harness)}
    assert got == {Window(0, 1000): 1, Window(2000, 3000): 1}


def test_without_a_late_stream_expired_records_are_counted_not_lost_silently() -> None:
    class NoLateStream(WindowedAggregation):
        window = Tumbling(SIZE)
        output = "out"

    globals()["NoLateStream"] = NoLateStream
    harness = TestHarness(topology(f"{__name__}:NoLateStream"))
    harness.feed("in", b"a", b"{}", 100)
    harness.advance_watermark(2_000)
    harness.feed("in", b"a", b"{}", 150)
    harness.run()
    assert harness.state("agg", b"a", LATE_DROPPED, JSON) == 1


@pytest.mark.parametrize("mode", list(Accumulation))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_strategy, data=st.data())
def test_records_past_the_lateness_miss_only_their_expired_windows(
    mode: Accumulation, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """The watermark jumps ahead at drawn moments, so some records arrive after some of
    their windows expired: each is left out of exactly those windows (the ones the
    watermark had passed by more than the lateness when it arrived), and goes once to
    the late stream when it missed any."""
    window = data.draw(st.sampled_from([Tumbling(SIZE), Hopping(SIZE, SIZE // 4)]))
    lateness = data.draw(st.sampled_from([0, SIZE // 2]))
    jumps = data.draw(st.lists(st.integers(0, SPAN), min_size=len(events), max_size=len(events)))

    class Drawn(WindowedAggregation):
        field = "v"
        output = "out"
        late_output = "late"
        aggregate = Sum()
        allowed_lateness_ms = lateness
        accumulation = mode
        trigger = AfterWatermark(early=EveryRecords(2))

    Drawn.window = window
    globals()["Drawn"] = Drawn
    harness = TestHarness(topology(f"{__name__}:Drawn"))
    watermark: int | None = None
    kept: dict[tuple[bytes, Window], float] = defaultdict(float)
    missed: list[bytes] = []
    for (key, ts, value), jump in zip(events, jumps, strict=True):
        body = json.dumps({"v": value}).encode()
        harness.feed("in", key.encode(), body, ts)
        harness.run()
        expired = [
            w
            for w in window.assign(ts)
            if watermark is not None and watermark > w.last_ms + lateness
        ]
        for w in window.assign(ts):
            if w not in expired:
                kept[(key.encode(), w)] += value
        if expired:
            missed.append(body)
        if watermark is None or jump > watermark:
            watermark = jump
            harness.advance_watermark(watermark)
    harness.advance_watermark(MAX_TIME)
    assert final_results(panes(harness), mode) == dict(kept)
    assert sorted(r.value for r in harness.outputs("late")) == sorted(missed)
