"""Source watermark properties, randomized."""

from __future__ import annotations

import itertools
import random

import pytest

from millrace.computations import MAX_TIME, MIN_TIME
from millrace.injector.source_watermark import SourceWatermark


def watermark_is_monotonic(history: list[int]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(history))


def never_ahead_of_unfinished_work(mark: int, previous: int, oldest_unfinished: int | None) -> bool:
    # A new value never passes unfinished work; a kept value may (it was published before).
    return mark == previous or oldest_unfinished is None or mark <= oldest_unfinished


@pytest.mark.parametrize("seed", range(20))
def test_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    bound, idle = rng.choice([0, 100, 1000]), rng.choice([50, 500, 5000])
    source = SourceWatermark(out_of_orderness_ms=bound, idle_timeout_ms=idle)
    now, max_seen, last_append = 1_000_000, None, None
    history = [source.current(None, now)]
    assert history[0] == MIN_TIME
    for _ in range(300):
        now += rng.randrange(0, 200)
        if rng.random() < 0.6:
            newest = rng.randrange(0, 100_000)
            source.observe(newest, now)
            max_seen = newest if max_seen is None else max(max_seen, newest)
            last_append = now
        oldest = rng.choice([None, rng.randrange(0, 100_000)])
        previous = history[-1]
        mark = source.current(oldest, now)
        history.append(mark)
        assert never_ahead_of_unfinished_work(mark, previous, oldest)
        if mark != previous and max_seen is not None and last_append is not None:
            idle_for = now - last_append
            if idle_for < idle:
                assert mark <= max_seen - bound, "no idle advance before the timeout"
    assert watermark_is_monotonic(history)


def test_idle_source_advances_with_processing_time() -> None:
    source = SourceWatermark(out_of_orderness_ms=1000, idle_timeout_ms=500)
    source.observe(10_000, now_ms=0)
    assert source.current(None, 0) == 9_000
    assert source.current(None, 499) == 9_000, "not idle yet"
    assert source.current(None, 500) == 10_001, "idle: everything seen is complete"
    assert source.current(None, 2_500) == 12_001, "then event time follows the clock"
    assert source.idle_advances >= 2
    assert source.current(11_000, 3_000) == 12_001, "never decreases"


def test_unfinished_work_holds_the_watermark() -> None:
    source = SourceWatermark(out_of_orderness_ms=0, idle_timeout_ms=10**9)
    source.observe(5_000, now_ms=0)
    assert source.current(1_200, 0) == 1_200
    assert source.current(None, 0) == 5_000
    assert source.is_late(4_999) and not source.is_late(5_000)


def test_refused_records_hold_the_watermark_and_are_not_idleness() -> None:
    """Issue 14: while the log refuses a request (a full disk), its client retries it; the
    watermark must neither pass its records nor advance as if the source were idle."""
    source = SourceWatermark(out_of_orderness_ms=100, idle_timeout_ms=1_000)
    source.observe(999, 0)
    assert source.current(None, 0) == 899
    for now in range(200, 3_000, 200):  # refused again and again: never idle
        source.refused(b"b", 1_000, now)
        assert source.current(None, now) == 899
    source.observe(1_999, 3_000, [b"b"])  # the retry got in: the hold is gone
    assert source.current(None, 3_000) == 1_899


def test_a_refused_request_that_never_comes_back_stops_holding_after_the_idle_timeout() -> None:
    source = SourceWatermark(out_of_orderness_ms=100, idle_timeout_ms=1_000)
    source.observe(999, 0)
    source.refused(b"gone", 950, 100)
    assert source.current(None, 1_050) == 899, "the refusal is recent: not idle"
    assert source.current(None, 2_200) > 1_000, "idle once the refusal is a timeout old"


def test_watermark_arithmetic_saturates_at_the_int64_limit() -> None:
    """An old log may hold an event time at the int64 limit: idle advance adds to it."""
    source = SourceWatermark(out_of_orderness_ms=100, idle_timeout_ms=1_000)
    source.observe(2**63 - 1, 0)
    assert source.current(None, 5_000) == 2**63 - 1


def test_a_finished_source_goes_to_the_end_of_time_once_nothing_is_unfinished() -> None:
    source = SourceWatermark(out_of_orderness_ms=1_000, idle_timeout_ms=10**9)
    source.observe(5_000, now_ms=0)
    source.refused(b"lost", 100, 0)
    source.finish()
    assert source.current(3_000, 0) == 3_000, "its records are not all processed yet"
    assert source.current(None, 0) == MAX_TIME, "a refused request can no longer come back"
    assert source.current(2_000, 10) == MAX_TIME, "never decreases"


def test_a_finished_source_that_never_saw_a_record_ends_too() -> None:
    source = SourceWatermark(out_of_orderness_ms=1_000, idle_timeout_ms=10**9)
    source.finish()
    assert source.current(None, 0) == MAX_TIME
