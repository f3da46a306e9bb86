"""The watermark authority's logic: aggregation, fencing by epoch, monotonic publication."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from computations import MAX_TIME, MIN_TIME
from injector.authority_journal import AuthorityJournal, JournalError
from injector.watermark_authority import (
    IntervalReport,
    WatermarkAuthority,
    downstream_never_ahead,
    never_ahead_of_work,
    watermark_is_monotonic,
)
from tests.workloads import two_stage_topology


def authority() -> WatermarkAuthority:
    """events -> counts (2 intervals) -> window_counts -> totals (2 intervals)."""
    return WatermarkAuthority(two_stage_topology(), clock=lambda: 42)


def rep(computation: str, index: int, work: int | None, epoch: int = 1) -> IntervalReport:
    return IntervalReport(computation, index, epoch, work)


def report_all(
    auth: WatermarkAuthority, counts: tuple[int | None, int | None], totals: tuple[int | None, ...]
) -> None:
    auth.report(
        [rep("counts", i, w) for i, w in enumerate(counts)]
        + [rep("totals", i, w) for i, w in enumerate(totals)]
    )


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


# -- property: random reports and source moves ---------------------------------


@dataclass(frozen=True)
class Report:
    computation: str
    index: int
    epoch: int
    work: int | None


@dataclass(frozen=True)
class SourceMove:
    ms: int


STEP = st.one_of(
    st.builds(
        Report,
        st.sampled_from(["counts", "totals"]),
        st.integers(0, 1),
        st.integers(0, 4),
        st.one_of(st.none(), st.integers(0, 1_000)),
    ),
    st.builds(SourceMove, st.integers(0, 1_200)),
)


class Oracle:
    """The authority's inputs, tracked independently of it: latest accepted report per interval."""

    def __init__(self) -> None:
        self.latest: dict[tuple[str, int], tuple[int, int | None]] = {}
        self.source = MIN_TIME

    def report(self, step: Report) -> bool:
        held = self.latest.get((step.computation, step.index))
        if held is not None and step.epoch < held[0]:
            return False
        self.latest[step.computation, step.index] = (step.epoch, step.work)
        return True

    def oldest_work(self) -> dict[str, int | None]:
        result: dict[str, int | None] = {}
        for name in ("counts", "totals"):
            # An interval that never reported holds its computation at MIN_TIME.
            works = [self.latest.get((name, i), (0, MIN_TIME))[1] for i in range(2)]
            result[name] = min((w for w in works if w is not None), default=None)
        return result


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(STEP, max_size=40))
def test_random_inputs_keep_the_invariants(steps: list[Report | SourceMove]) -> None:
    topology = two_stage_topology()
    auth = WatermarkAuthority(topology, clock=lambda: 0)
    oracle = Oracle()
    before = auth.watermarks()
    for step in steps:
        if isinstance(step, Report):
            expected = oracle.report(step)
            accepted, ignored = auth.report(
                [IntervalReport(step.computation, step.index, step.epoch, step.work)]
            )
            assert (accepted, ignored) == (
                (1, []) if expected else (0, [(step.computation, step.index)])
            )
        else:
            oracle.source = max(oracle.source, step.ms)
            auth.set_source_watermark("events", step.ms)
        after = auth.watermarks()
        changed = [name for name in after if after[name] != before[name]]

        assert watermark_is_monotonic(before, after)
        # A value is checked when it is published; one kept from earlier may be
        # ahead of older work reported since (that work is late).
        assert never_ahead_of_work(
            topology, after, oracle.oldest_work(), {"events": oracle.source}, changed
        )
        assert downstream_never_ahead(topology, after)
        assert auth.input_watermark("totals") == after["counts"]
        before = after

    # Everything done and the source finished: the watermarks reach the end.
    auth.report([IntervalReport(c, i, 99, None) for c in ("counts", "totals") for i in range(2)])
    auth.set_source_watermark("events", MAX_TIME)
    assert set(auth.watermarks().values()) == {MAX_TIME}


def test_the_predicates_catch_violations() -> None:
    topology = two_stage_topology()
    assert not watermark_is_monotonic({"counts": 5}, {"counts": 4})
    assert not watermark_is_monotonic({"counts": 5}, {})
    work = {"counts": 100, "totals": None}
    source = {"events": 1_000}
    # totals is bounded by counts' work, upstream of it.
    assert not never_ahead_of_work(topology, {"totals": 101}, work, source)
    assert never_ahead_of_work(topology, {"totals": 100}, work, source)
    assert not never_ahead_of_work(topology, {"counts": 50}, work, {"events": 10})
    assert not downstream_never_ahead(topology, {"source:events": 10, "counts": 10, "totals": 11})


def test_only_journaled_values_are_published_once_durability_is_required() -> None:
    """A watcher never sees a value that a crash could take back."""
    from tests.workloads import two_stage_topology as topology_of

    authority = WatermarkAuthority(topology_of())
    authority.require_durability()
    authority.set_source_watermark("events", 1_000)
    assert authority.watermarks()["source:events"] < 1_000, "not journaled yet"
    state = authority.journal()
    authority.set_source_watermark("events", 2_000)  # newer than what is journaled
    authority.mark_durable(state.published)
    assert authority.watermarks()["source:events"] == 1_000
    restored = WatermarkAuthority(topology_of())
    restored.restore(state)
    restored.require_durability()
    assert restored.watermarks()["source:events"] == 1_000, "a restart resumes from the journal"


def test_a_restored_authority_publishes_nothing_new_until_every_interval_reports_again() -> None:
    """Issue 14: a hold reported to the old incarnation (never journaled, because nothing
    published changed) must not be forgotten: restored reports do not count."""
    before = authority()
    before.set_source_watermark("events", 1_000)
    report_all(before, (None, None), (None, None))
    assert before.watermarks()["totals"] == 1_000
    # counts/0 now holds work at 1_100 (productions not yet acked downstream): the
    # report is accepted, but nothing published changes, so nothing new is journaled.
    version = before.version
    before.report([rep("counts", 0, 1_100)])
    assert before.version == version
    state = before.journal()

    after = authority()
    after.restore(state)
    after.set_source_watermark("events", 5_000)  # every source record was acknowledged
    marks = after.watermarks()
    assert marks["counts"] == 1_000 and marks["totals"] == 1_000, "nothing new yet"
    report_all(after, (1_100, None), (None, None))  # everyone reports to the new incarnation
    assert after.watermarks()["counts"] == 1_100
    assert after.watermarks()["totals"] == 1_100


def test_totals_waits_for_every_upstream_interval_after_a_restore() -> None:
    before = authority()
    before.set_source_watermark("events", 1_000)
    report_all(before, (None, None), (None, None))
    after = authority()
    after.restore(before.journal())
    after.set_source_watermark("events", 5_000)
    after.report([rep("totals", 0, None), rep("totals", 1, None), rep("counts", 0, None)])
    assert after.watermarks()["totals"] == 1_000, "counts/1 has not reported yet"
    after.report([rep("counts", 1, None)])
    assert after.watermarks()["totals"] == 5_000


def test_restored_epochs_still_fence_stale_reporters() -> None:
    before = authority()
    before.report([rep("counts", 0, None, epoch=7)])
    after = authority()
    after.restore(before.journal())
    accepted, ignored = after.report([rep("counts", 0, 5, epoch=6)])
    assert (accepted, ignored) == (0, [("counts", 0)])
    assert after.reported_epochs()[("counts", 0)] == 7


def test_a_late_retry_of_an_older_report_does_not_replace_a_newer_one() -> None:
    auth = authority()
    auth.set_source_watermark("events", 1_000)
    report_all(auth, (None, None), (None, None))
    newer = IntervalReport("counts", 0, 1, 500, sequence=9)
    older = IntervalReport("counts", 0, 1, None, sequence=8)  # sent first, arrived late
    auth.report([newer])
    auth.report([older])
    assert auth.oldest_work()["counts"] == 500


def test_absurd_journal_values_saturate_instead_of_overflowing() -> None:
    """Issue 15: a journal written before event times were range-checked may hold values
    past int64; restoring it must leave every published value a valid int64."""
    auth = authority()
    auth.restore(
        AuthorityJournal.from_json(
            {
                "published": {"source:events": 2**63 + 1999, "counts": 2**70},
                "sources": {"events": 2**64},
                "reports": [],
            }
        )
    )
    assert all(MIN_TIME <= v <= MAX_TIME for v in auth.watermarks().values())
    assert auth.set_source_watermark("events", 2**70) == MAX_TIME


def test_a_report_at_an_epoch_the_registry_did_not_grant_is_ignored() -> None:
    """Issue 15: a forged report above the lease must not take an interval's watermark over
    (the real owner's reports would be stale from then on)."""
    auth = WatermarkAuthority(two_stage_topology(), clock=lambda: 42, leased_epoch=lambda c, i: 3)
    for forged in (10**9, 2**63 - 1):
        accepted, ignored = auth.report([rep("counts", 0, MIN_TIME, epoch=forged)])
        assert (accepted, ignored) == (0, [("counts", 0)])
    assert auth.report([rep("counts", 0, 500, epoch=3)]) == (1, [])


def test_the_journal_round_trips_and_a_malformed_one_is_refused_with_a_message() -> None:
    before = authority()
    before.set_source_watermark("events", 1_000)
    journal = before.journal()
    assert AuthorityJournal.from_json(json.loads(json.dumps(journal.to_json()))) == journal
    for bad in ([1, 2], {"published": {"counts": "soon"}}, {"reports": [["c", 0]]}):
        with pytest.raises(JournalError, match="malformed watermark journal"):
            AuthorityJournal.from_json(bad)
