"""The watermark authority across a restart: the journal, what a restored authority
publishes and whom it still fences."""

from __future__ import annotations

import json

import pytest

from millrace.computations import MAX_TIME, MIN_TIME, IntervalId
from millrace.injector.authority_journal import AuthorityJournal, JournalError
from millrace.injector.watermark_authority import (
    IntervalReport,
    WatermarkAuthority,
)
from tests.injector_authority._reports import authority, rep, report_all
from tests.workloads import two_stage_topology


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
    assert after.reported_epochs()[IntervalId("counts", 0)] == 7


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


def test_a_change_made_while_the_journal_is_written_is_journaled_next() -> None:
    """Issue 30: a change landing between taking the journal and marking it durable must
    not count as journaled (at the end of the input nothing else changes, and the
    published watermark stayed behind for good)."""
    authority = WatermarkAuthority(two_stage_topology())
    authority.require_durability()
    authority.set_source_watermark("events", 1_000)
    version, state = authority.versioned_journal()
    authority.set_source_watermark("events", 2_000)  # lands "during the write"
    journaled = authority.mark_durable(state.published, as_of=version)
    assert authority.watermarks()["source:events"] == 1_000
    assert journaled != authority.version, "the change is still to be journaled"
    version, state = authority.versioned_journal()
    assert authority.mark_durable(state.published, as_of=version) == authority.version
    assert authority.watermarks()["source:events"] == 2_000


def test_a_journal_nothing_changed_under_covers_its_own_publication() -> None:
    authority = WatermarkAuthority(two_stage_topology())
    authority.require_durability()
    authority.set_source_watermark("events", 1_000)
    version, state = authority.versioned_journal()
    assert authority.mark_durable(state.published, as_of=version) == authority.version
