"""Time-segmented Bloom filters: expiry, garbage collection, rebuild on open."""

from __future__ import annotations

import random
from pathlib import Path

from millrace.statestore import SenderProgress, StateStore, StoreConfig
from tests.store_contract.conftest import StoreFactory

MINUTE = 60_000


def ids(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(count)]


def commit_ids(factory: StoreFactory, record_ids: list[bytes]) -> None:
    store = factory.current
    assert store is not None
    txn = store.begin()
    txn.mark_seen(record_ids)
    txn.commit()


def filter_bits(factory: StoreFactory) -> dict[tuple[int, int], bytes]:
    store = factory.current
    assert store is not None
    return {
        (segment, chain): bloom.bits.to_bytes()
        for segment, chains in store.dedup.segment_filters().items()
        for chain, bloom in enumerate(chains)
    }


def test_old_segments_expire_and_recent_ids_stay(factory: StoreFactory) -> None:
    config = StoreConfig(dedup_segment_ms=10 * MINUTE, dedup_retention_ms=30 * MINUTE)
    store = factory.open(config)
    factory.clock.now_ms = 0
    old = ids(1, 300)
    commit_ids(factory, old)
    factory.clock.now_ms = 25 * MINUTE
    recent = ids(2, 300)
    commit_ids(factory, recent)
    assert set(store.dedup.stored_segments()) == {0, 2}

    # Segment 0 spans [0, 10 min): it expires once 10 min is 30 min ago.
    factory.clock.now_ms = 40 * MINUTE - 1
    assert all(store.begin().seen(old)), "not yet past retention"
    factory.clock.now_ms = 40 * MINUTE
    assert not any(store.begin().seen(old)), "expired ids are forgotten at once"
    assert all(store.begin().seen(recent))

    # The next commit garbage-collects: filters dropped, ids range-deleted.
    commit_ids(factory, ids(3, 10))
    assert 0 not in store.dedup.segment_filters()
    assert set(store.dedup.stored_segments()) == {2, 4}

    store = factory.reopen()
    assert not any(store.begin().seen(old))
    assert all(store.begin().seen(recent))


def test_rebuilt_filters_are_identical(factory: StoreFactory) -> None:
    config = StoreConfig(dedup_segment_ms=MINUTE, dedup_retention_ms=10 * MINUTE)
    factory.open(config)
    stored: list[bytes] = []
    for minute in range(4):
        factory.clock.now_ms = minute * MINUTE + 5
        batch = ids(minute, 500)
        commit_ids(factory, batch)
        stored.extend(batch)
    before = filter_bits(factory)
    probes = stored[::7] + ids(99, 5000)
    store = factory.current
    assert store is not None
    answers = store.begin().seen(probes)

    store = factory.reopen()
    assert store.recovered_ids == len(stored)
    assert filter_bits(factory) == before, "same ids, same filters, same bits"
    assert store.begin().seen(probes) == answers


def test_full_filters_chain_and_rebuild_per_chain(factory: StoreFactory) -> None:
    config = StoreConfig(bloom_capacity=100, bloom_error_rate=0.01)
    factory.open(config)
    stored = ids(5, 350)
    for start in range(0, 350, 60):
        commit_ids(factory, stored[start : start + 60])
    store = factory.current
    assert store is not None
    chains = next(iter(store.dedup.segment_filters().values()))
    assert [bloom.count for bloom in chains] == [100, 100, 100, 50]
    before = filter_bits(factory)
    store = factory.reopen()
    assert filter_bits(factory) == before
    assert all(store.begin().seen(stored))
    fresh = ids(6, 2000)
    assert sum(store.begin().seen(fresh)) == 0, "a false positive never answers 'seen'"


def test_downtime_does_not_age_record_ids(factory: StoreFactory) -> None:
    """Issue 14: a store closed for longer than the retention forgets nothing: retention
    counts the store's own running time (a receiver down for hours while its sender
    still holds an unacknowledged record must still know the record)."""
    config = StoreConfig(dedup_segment_ms=MINUTE, dedup_retention_ms=2 * MINUTE)
    store = factory.open(config)
    factory.clock.now_ms = 0
    kept = ids(1, 10)
    commit_ids(factory, kept)
    factory.clock.now_ms = 10 * MINUTE  # ten minutes down
    store = factory.reopen()
    assert store.recovered_ids == 10
    assert all(store.begin().seen(kept)), "the downtime did not count"
    factory.clock.now_ms = 13 * MINUTE  # three minutes up: past the retention now
    assert not any(store.begin().seen(kept))
    commit_ids(factory, ids(2, 1))
    assert len(store.dedup.stored_segments()) == 1, "the expired segment was collected"


def test_a_wall_clock_step_does_not_age_record_ids(tmp_path: Path) -> None:
    """The default clock is monotonic: stepping the wall clock changes nothing."""
    with StateStore.open_rocksdb(tmp_path / "s", config=StoreConfig()) as store:
        kept = ids(1, 10)
        txn = store.begin()
        txn.mark_seen(kept)
        txn.commit()
        before = store.dedup_now()
        assert all(store.begin().seen(kept))
        assert store.dedup_now() - before < 60_000


def test_ids_stay_until_their_sender_can_no_longer_resend_them(factory: StoreFactory) -> None:
    """Past the retention, a segment is forgotten only once every sender that delivered
    into it reported a floor past what it delivered (and the book survives reopening)."""
    config = StoreConfig(dedup_segment_ms=MINUTE, dedup_retention_ms=2 * MINUTE)
    store = factory.open(config)
    factory.clock.now_ms = 0
    held = ids(1, 10)
    txn = store.begin()
    txn.mark_seen(held)
    txn.note_progress([SenderProgress(b"up/0", floor=3, last=7)])
    txn.commit()
    factory.clock.now_ms = 30 * MINUTE  # long past the retention
    assert all(store.begin().seen(held)), "the sender may still resend positions 3..7"
    commit_ids(factory, ids(2, 1))
    store = factory.reopen()
    assert all(store.begin().seen(held)), "still, after a restart"
    txn = store.begin()
    txn.mark_seen(ids(3, 1))
    txn.note_progress([SenderProgress(b"up/0", floor=8, last=9)])
    txn.commit()
    assert not any(store.begin().seen(held)), "floor 8 > 7: nothing of it can come back"
    commit_ids(factory, ids(4, 1))
    assert 0 not in store.dedup.stored_segments()
