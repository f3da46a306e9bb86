"""The watermark authority's logic: aggregation, fencing by epoch, monotonic publication."""

from __future__ import annotations

import threading

import pytest

from millrace.computations import MAX_TIME, MIN_TIME
from millrace.injector.watermark_authority import (
    IntervalReport,
    WatermarkAuthority,
)
from tests.injector_authority._reports import authority, rep, report_all
from tests.workloads import two_stage_topology


def test_everything_starts_at_min_time() -> None:
    auth = authority()
    assert auth.watermarks() == {"counts": MIN_TIME, "totals": MIN_TIME, "source:events": MIN_TIME}
    assert auth.version == 0


def test_counts_is_min_of_source_and_its_work() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (700, None), (None, None))
    assert auth.watermarks()["counts"] == 700
    assert auth.watermarks()["source:events"] == 1_000

    auth.report([rep("counts", 0, None)])
    assert auth.watermarks()["counts"] == 1_000  # no work left: the source bounds it


def test_totals_is_min_of_counts_and_its_work() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (800, 900), (None, 500))
    assert auth.watermarks() == {"source:events": 1_000, "counts": 800, "totals": 500}

    auth.report([rep("totals", 1, None)])
    assert auth.watermarks()["totals"] == 800  # bounded by counts now


def test_an_interval_that_never_reported_holds_its_computation() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    auth.report([rep("counts", 0, None), rep("totals", 0, None), rep("totals", 1, None)])
    assert auth.watermarks()["counts"] == MIN_TIME
    assert auth.watermarks()["totals"] == MIN_TIME  # held by counts
    assert auth.oldest_work()["counts"] == MIN_TIME

    auth.report([rep("counts", 1, None)])
    assert auth.watermarks()["counts"] == 1_000
    assert auth.watermarks()["totals"] == 1_000


def test_a_stale_epoch_is_ignored_and_changes_nothing() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    auth.report([rep("counts", 0, 600, epoch=5), rep("counts", 1, None, epoch=5)])
    before, version = auth.watermarks(), auth.version

    accepted, ignored = auth.report([rep("counts", 0, None, epoch=4)])

    assert (accepted, ignored) == (0, [("counts", 0)])
    assert auth.watermarks() == before
    assert auth.version == version
    assert auth.oldest_work()["counts"] == 600


def test_equal_and_higher_epochs_replace() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    auth.report([rep("counts", 0, 600, epoch=5), rep("counts", 1, None, epoch=5)])

    assert auth.report([rep("counts", 0, 700, epoch=5)]) == (1, [])
    assert auth.watermarks()["counts"] == 700
    assert auth.report([rep("counts", 0, None, epoch=6)]) == (1, [])
    assert auth.watermarks()["counts"] == 1_000
    # The new owner's epoch is now the bar: the old one is fenced off.
    assert auth.report([rep("counts", 0, 100, epoch=5)]) == (0, [("counts", 0)])


def test_a_report_below_the_current_lease_is_ignored_before_the_new_owner_reports() -> None:
    leases = {("counts", 0): 3}
    auth = WatermarkAuthority(
        two_stage_topology(), clock=lambda: 42, leased_epoch=lambda c, i: leases.get((c, i), 0)
    )
    auth.set_source_watermark("events", 1_000)
    assert auth.report([rep("counts", 0, 600, epoch=3), rep("counts", 1, None)]) == (2, [])

    leases[("counts", 0)] = 4  # the interval was leased to a new owner, who has not reported
    assert auth.report([rep("counts", 0, None, epoch=3)]) == (0, [("counts", 0)])
    assert auth.watermarks()["counts"] == 600, "the replaced owner cannot release its hold"
    assert auth.report([rep("counts", 0, None, epoch=4)]) == (1, [])
    assert auth.watermarks()["counts"] == 1_000


def test_reports_within_one_batch_are_judged_in_order() -> None:
    auth = authority()
    accepted, ignored = auth.report([rep("counts", 0, 10, epoch=3), rep("counts", 0, 5, epoch=2)])
    assert (accepted, ignored) == (1, [("counts", 0)])
    assert auth.report([rep("counts", 1, None)]) == (1, [])
    assert auth.oldest_work()["counts"] == 10


def test_unknown_intervals_are_ignored() -> None:
    auth = authority()
    accepted, ignored = auth.report(
        [
            rep("nope", 0, 1),
            rep("counts", 2, 1),
            rep("counts", -1, 1),
            IntervalReport("totals", 0, 1, 1, count=4),  # another sharding of totals
            IntervalReport("totals", 1, 1, 1, count=2),
        ]
    )
    assert accepted == 1
    assert ignored == [("nope", 0), ("counts", 2), ("counts", -1), ("totals", 0)]


def test_published_values_never_decrease() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (None, None), (None, None))
    assert auth.watermarks() == {"source:events": 1_000, "counts": 1_000, "totals": 1_000}
    version = auth.version

    # A restarted node reports work older than what is already published (late work).
    auth.report([rep("counts", 0, 200, epoch=2), rep("totals", 1, 100, epoch=2)])
    auth.set_source_watermark("events", 500)  # a source never moves back either

    assert auth.watermarks() == {"source:events": 1_000, "counts": 1_000, "totals": 1_000}
    assert auth.version == version
    assert auth.source_watermarks() == {"events": 1_000}

    # Once the late work is done and the source moves on, the watermarks follow.
    auth.set_source_watermark("events", 2_000)
    auth.report([rep("counts", 0, 1_500, epoch=2), rep("totals", 1, None, epoch=2)])
    assert auth.watermarks() == {"source:events": 2_000, "counts": 1_500, "totals": 1_500}


def test_input_watermark_is_what_feeds_the_computation() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (800, None), (300, None))
    assert auth.input_watermark("counts") == auth.watermarks()["source:events"] == 1_000
    # Timers of totals fire on counts' watermark, not held by totals' own work (300).
    assert auth.input_watermark("totals") == auth.watermarks()["counts"] == 800
    with pytest.raises(KeyError):
        auth.input_watermark("nope")


def test_a_finished_source_lets_everything_complete() -> None:
    auth = authority()
    auth.set_source_watermark("events", MAX_TIME)
    report_all(auth, (None, None), (None, None))
    assert set(auth.watermarks().values()) == {MAX_TIME}


def test_setting_a_non_source_stream_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a source stream"):
        authority().set_source_watermark("window_counts", 1)


def test_wait_for_change_wakes_on_a_change_and_times_out_otherwise() -> None:
    auth = authority()
    assert auth.wait_for_change(0, timeout=0.01) == (0, auth.watermarks())

    result: list[tuple[int, dict[str, int]]] = []
    waiter = threading.Thread(target=lambda: result.append(auth.wait_for_change(0, timeout=30)))
    waiter.start()
    auth.set_source_watermark("events", 7)
    waiter.join()

    assert result == [(1, {"source:events": 7, "counts": MIN_TIME, "totals": MIN_TIME})]
    # An older version returns at once.
    assert auth.wait_for_change(0, timeout=30)[0] == 1


def test_updates_carry_the_time_they_were_computed() -> None:
    now = [10]
    auth = WatermarkAuthority(two_stage_topology(), clock=lambda: now[0])
    now[0] = 20
    auth.set_source_watermark("events", 5)
    _, published = auth.snapshot()
    assert published["source:events"].computed_at_ms == 20
    assert published["counts"].computed_at_ms == 10  # unchanged since start


def test_a_split_holds_the_watermark_until_both_halves_report() -> None:
    now = {"counts": [0, 1], "totals": [0, 1]}
    auth = WatermarkAuthority(
        two_stage_topology(), clock=lambda: 42, intervals_now=lambda name: now[name]
    )
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (700, None), (None, None))
    assert auth.watermarks()["counts"] == 700
    now["counts"] = [0, 4, 5]  # interval 1 split
    auth.report([rep("counts", 0, 800, epoch=2), rep("counts", 1, 900, epoch=2)])
    assert auth.watermarks()["counts"] == 700, "held: the halves have not reported"
    assert auth.report([rep("counts", 4, 850, epoch=2)]) == (1, [])
    auth.report([rep("counts", 5, None, epoch=2)])
    assert auth.watermarks()["counts"] == 800
    now["counts"] = [0, 1]  # merged back: 1's old report does not stand for it
    assert auth.report([rep("counts", 1, 900, epoch=1)]) == (0, [("counts", 1)])
    auth.report([rep("counts", 0, 950, epoch=3)])
    assert auth.watermarks()["counts"] == 800, "held until the merged interval reports"
    auth.report([rep("counts", 1, 990, epoch=3)])
    assert auth.watermarks()["counts"] == 950
