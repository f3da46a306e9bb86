"""User-defined merging window assigners (``WindowAssigner.assign`` and ``merge``) in the
real engine (``TestHarness``): sessions bounded by fixed periods against a sorted-pass
oracle in any arrival order, and how merged state, panes and timers carry over."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import JSON
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    Count,
    EveryRecords,
    Sessions,
    Sum,
    Timing,
    Window,
    WindowAssigner,
    WindowedAggregation,
)
from millrace.dataflow._windows import parse_window
from tests.dataflow.test_windowed_aggregation import (
    assert_merged_results,
    events_strategy,
    panes,
    run_drawn,
    topology,
)

GAP = 400
PERIOD = 1_000


@dataclass(frozen=True)
class BoundedSessions(WindowAssigner):
    """Sessions with a gap that never cross a multiple of ``period_ms`` (as daily
    sessions split at midnight), so none is longer than the period."""

    gap_ms: int
    period_ms: int
    merging = True

    def assign(self, event_time_ms: int) -> list[Window]:
        return [Window(event_time_ms, min(event_time_ms + self.gap_ms, self._limit(event_time_ms)))]

    def merge(self, windows: Sequence[Window]) -> list[tuple[list[Window], Window]]:
        groups: list[list[Window]] = []
        for window in sorted(windows):
            last = groups[-1][-1] if groups else None
            same_period = last is not None and self._limit(last.start) == self._limit(window.start)
            if last is not None and same_period and window.start < max(w.end for w in groups[-1]):
                groups[-1].append(window)
            else:
                groups.append([window])
        return [
            (group, Window(group[0].start, max(w.end for w in group)))
            for group in groups
            if len(group) > 1
        ]

    def _limit(self, time_ms: int) -> int:
        return time_ms - time_ms % self.period_ms + self.period_ms


def bounded_session_oracle(events: list[tuple[str, int, int]]) -> dict[tuple[bytes, Window], float]:
    """Per key and period, a sorted pass: a record at least ``GAP`` after the session's
    last one starts a new session; a session ends ``GAP`` after its last record or at
    the period's end."""
    by_period: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for key, ts, value in events:
        by_period[(key, ts // PERIOD)].append((ts, value))
    sessions: dict[tuple[bytes, Window], float] = {}
    for (key, period), items in by_period.items():
        end_of_period = (period + 1) * PERIOD
        current: list[tuple[int, int]] = []
        for ts, value in sorted(items):
            if current and ts >= current[-1][0] + GAP:
                close = min(current[-1][0] + GAP, end_of_period)
                sessions[(key.encode(), Window(current[0][0], close))] = sum(v for _, v in current)
                current = []
            current.append((ts, value))
        close = min(current[-1][0] + GAP, end_of_period)
        sessions[(key.encode(), Window(current[0][0], close))] = sum(v for _, v in current)
    return sessions


def test_merge_says_which_windows_become_one() -> None:
    assert Sessions(300).merge([Window(0, 300), Window(500, 800)]) == []
    assert Sessions(300).merge([Window(0, 300), Window(200, 500), Window(500, 800)]) == [
        ([Window(0, 300), Window(200, 500)], Window(0, 500))
    ]
    bounded = BoundedSessions(GAP, PERIOD)
    assert bounded.assign(800) == [Window(800, 1000)]
    assert bounded.merge([Window(800, 1000), Window(1000, 1400)]) == []  # two periods
    assert not WindowAssigner.merging


@pytest.mark.parametrize("mode", list(Accumulation))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_strategy, data=st.data())
def test_a_user_defined_merging_assigner_gives_the_same_sessions_in_any_order(
    mode: Accumulation, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    found = run_drawn(data, events, BoundedSessions(GAP, PERIOD), Sum(), mode)
    assert_merged_results(found, bounded_session_oracle(events), mode)


class MergeOnThird(WindowAssigner):
    """Not order-independent, only a probe: a key's windows all merge into their span
    once there are three, and the span is the first, long window."""

    merging = True

    def assign(self, event_time_ms: int) -> list[Window]:
        return [Window(event_time_ms, event_time_ms + (100 if event_time_ms == 0 else 10))]

    def merge(self, windows: Sequence[Window]) -> list[tuple[list[Window], Window]]:
        if len(windows) < 3:
            return []
        return [(list(windows), Window(min(w.start for w in windows), max(w.end for w in windows)))]


class ThirdCounts(WindowedAggregation):
    window = MergeOnThird()
    aggregate = Count()
    allowed_lateness_ms = 1_000
    trigger = AfterWatermark(early=EveryRecords(1))
    accumulation = Accumulation.RETRACTING
    output = "out"
    late_output = "late"


def test_a_live_window_that_takes_others_in_keeps_its_panes_and_timers() -> None:
    harness = TestHarness(topology(f"{__name__}:ThirdCounts"))
    for ts in (0, 10, 30):
        harness.feed("in", b"a", b"{}", ts)
        harness.run()
    assert harness.state("agg", b"a", "sessions", JSON) == [[0, 100]]
    assert harness.state("agg", b"a", "w:10/20", JSON) is None
    harness.advance_watermark(5_000)
    got = [(p.window, p.index, p.timing, p.retraction, p.value) for p in panes(harness)]
    first, second = Window(0, 100), Window(10, 20)
    assert got == [
        (first, 0, Timing.EARLY, False, 1),
        (second, 0, Timing.EARLY, False, 1),
        (second, 0, Timing.EARLY, True, 1),  # merged away: retracted
        (first, 0, Timing.EARLY, True, 1),
        (first, 1, Timing.EARLY, False, 3),  # its own panes go on: 0, 10 and 30
        (first, 1, Timing.EARLY, True, 3),
        (first, 2, Timing.ON_TIME, False, 3),  # no on-time pane of the merged-away window
    ]
    assert harness.state("agg", b"a", "sessions", JSON) is None


def session_oracle(
    events: list[tuple[str, int, int]], gap: int, *, touching: bool
) -> dict[tuple[bytes, Window], float]:
    """Per key, a sorted pass: a record more than ``gap`` after the session's last one
    (or exactly ``gap``, unless ``touching``) starts a new session."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, ts, value in events:
        by_key[key].append((ts, value))
    sessions: dict[tuple[bytes, Window], float] = {}
    for key, items in by_key.items():
        current: list[tuple[int, int]] = []
        for ts, value in sorted(items):
            apart = ts - max(t for t, _ in current) if current else None
            if apart is not None and (apart > gap or (apart == gap and not touching)):
                last = max(t for t, _ in current)
                sessions[(key.encode(), Window(current[0][0], last + gap))] = sum(
                    v for _, v in current
                )
                current = []
            current.append((ts, value))
        last = max(t for t, _ in current)
        sessions[(key.encode(), Window(current[0][0], last + gap))] = sum(v for _, v in current)
    return sessions


def test_touching_sessions_merge_only_when_asked() -> None:
    windows = [Window(0, 300), Window(300, 600)]
    assert Sessions(300).merge(windows) == []
    assert Sessions(300, merge_touching=True).merge(windows) == [(windows, Window(0, 600))]
    assert parse_window("session:300:touching") == Sessions(300, merge_touching=True)
    assert parse_window("session:300") == Sessions(300)


@pytest.mark.parametrize("touching", [False, True])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_strategy, data=st.data())
def test_sessions_a_gap_apart_in_any_order(
    touching: bool, events: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    """Times on a coarse grid, so records exactly a gap apart are common."""
    events = [(key, ts // GAP * GAP // 2, value) for key, ts, value in events]
    assigner = Sessions(GAP // 2, merge_touching=touching)
    found = run_drawn(data, events, assigner, Sum(), Accumulation.ACCUMULATING)
    expected = session_oracle(events, GAP // 2, touching=touching)
    assert_merged_results(found, expected, Accumulation.ACCUMULATING)
