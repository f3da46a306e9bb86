"""The store contract: every test runs against RocksDB and the memory backend."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.statestore import (
    StateStore,
    StoreConfig,
    TimeDomain,
    Timer,
    TransactionStateError,
    TransactionStatus,
)
from tests.store_contract.conftest import StoreFactory

EVENT = TimeDomain.EVENT_TIME
PROC = TimeDomain.PROCESSING_TIME


def timer(key: bytes, tag: str, time_ms: int, domain: TimeDomain = EVENT) -> Timer:
    return Timer(domain=domain, key=key, tag=tag, time_ms=time_ms)


def test_state_reads_see_own_writes_and_commit_publishes(store: StateStore) -> None:
    txn = store.begin()
    assert txn.get(b"a") is None
    txn.put(b"a", b"1")
    txn.put(b"b", b"2")
    txn.delete(b"b")
    assert txn.get(b"a") == b"1"
    assert txn.get(b"b") is None
    assert store.get(b"a") is None, "nothing is visible before commit"
    txn.commit()
    assert store.get(b"a") == b"1"
    assert store.get(b"b") is None


@pytest.mark.parametrize("cache_entries", [0, 2, 100])
def test_many_keys_read_at_once_equal_one_by_one(factory: StoreFactory, cache_entries: int) -> None:
    store = factory.open(StoreConfig(sync=True, state_cache_entries=cache_entries))
    txn = store.begin()
    txn.write_many([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    txn.commit()
    keys = [b"c", b"x", b"a", b"b", b"a", b"y"]
    for _ in range(2):  # cold, then through the cache
        assert store.get_many(keys) == [store.get(k) for k in keys]
        assert store.get_many(keys) == [b"3", None, b"1", b"2", b"1", None]
    txn = store.begin()
    txn.put(b"x", b"new")
    txn.delete(b"a")
    assert txn.get_many(keys) == [b"3", b"new", None, b"2", None, None]
    assert store.get_many([]) == []


@settings(max_examples=60, deadline=None)
@given(
    commits=st.lists(
        st.dictionaries(
            st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]),
            st.one_of(st.none(), st.binary(min_size=1, max_size=4)),
            max_size=4,
        ),
        max_size=12,
    ),
    reads=st.lists(st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"g"]), max_size=8),
)
def test_the_cache_smaller_than_the_keys_always_reads_what_was_committed(
    tmp_path_factory: pytest.TempPathFactory,
    commits: list[dict[bytes, bytes | None]],
    reads: list[bytes],
) -> None:
    """A write-through cache of 3 entries over 7 keys: every read, one at a time or many
    at once, equals a model of the commits, whatever was evicted when."""
    store = StateStore.open_rocksdb(
        tmp_path_factory.mktemp("cache"), config=StoreConfig(sync=False, state_cache_entries=3)
    )
    model: dict[bytes, bytes] = {}
    try:
        for changes in commits:
            txn = store.begin()
            txn.write_many(changes.items())
            txn.commit()
            for key, value in changes.items():
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            assert store.get_many(reads) == [model.get(k) for k in reads]
            assert [store.get(k) for k in reversed(reads)] == [
                model.get(k) for k in reversed(reads)
            ]
    finally:
        store.close()


def test_abort_discards_everything(store: StateStore) -> None:
    txn = store.begin()
    txn.put(b"a", b"1")
    txn.mark_seen([b"r" * 16])
    txn.set_timer(timer(b"k", "t", 5))
    txn.add_outbox(b"p", b"x")
    txn.set_meta("m", b"v")
    txn.abort()
    assert txn.status is TransactionStatus.FAILED
    assert store.get(b"a") is None
    assert store.begin().seen([b"r" * 16]) == [False]
    assert store.due_timers(EVENT, None) == []
    assert list(store.outbox()) == []
    assert store.get_meta("m") is None


def test_transaction_is_a_state_machine(store: StateStore) -> None:
    txn = store.begin()
    txn.put(b"a", b"1")
    txn.commit()
    assert txn.status is TransactionStatus.COMMITTED
    with pytest.raises(TransactionStateError):
        txn.commit()
    with pytest.raises(TransactionStateError):
        txn.put(b"a", b"2")
    aborted = store.begin()
    aborted.abort()
    with pytest.raises(TransactionStateError):
        aborted.commit()


def test_overwrite_and_delete_survive_reopen(factory: StoreFactory) -> None:
    store = factory.open()
    first = store.begin()
    first.put(b"a", b"1")
    first.put(b"b", b"1")
    first.commit()
    second = store.begin()
    second.put(b"a", b"2")
    second.delete(b"b")
    second.commit()
    store = factory.reopen()
    assert store.get(b"a") == b"2"
    assert store.get(b"b") is None


def test_scan_state_by_prefix(store: StateStore) -> None:
    txn = store.begin()
    for key in (b"u1/a", b"u1/b", b"u2/a", b"u1\xff", b"u0/z"):
        txn.put(key, key)
    txn.commit()
    assert [k for k, _ in store.scan_state(b"u1/")] == [b"u1/a", b"u1/b"]
    assert [k for k, _ in store.scan_state(b"u1")] == [b"u1/a", b"u1/b", b"u1\xff"]


def test_seen_covers_committed_and_pending_ids(factory: StoreFactory) -> None:
    store = factory.open()
    ids = [bytes([i]) * 16 for i in range(5)]
    txn = store.begin()
    assert txn.seen(ids) == [False] * 5
    txn.mark_seen(ids[:2])
    assert txn.seen(ids) == [True, True, False, False, False], "marked ids count within the txn"
    txn.commit()
    assert store.begin().seen(ids) == [True, True, False, False, False]
    store = factory.reopen()
    assert store.begin().seen(ids) == [True, True, False, False, False]


def test_duplicate_ids_within_one_batch(store: StateStore) -> None:
    rid = b"x" * 16
    txn = store.begin()
    assert txn.seen([rid, rid]) == [False, False]
    txn.mark_seen([rid, rid])
    txn.commit()
    assert store.begin().seen([rid]) == [True]


def test_dedup_counters(store: StateStore) -> None:
    stored = [bytes([i]) * 16 for i in range(50)]
    txn = store.begin()
    txn.mark_seen(stored)
    txn.commit()
    fresh = [bytes([i, 250]) * 8 for i in range(200)]
    store.begin().seen(stored + fresh)
    stats = store.dedup_stats()
    assert stats.lookups == 250
    assert stats.confirmations == 50
    assert stats.bloom_negatives + stats.false_positives == 200
    assert stats.bloom_negatives >= 190, "the filter answers almost every new id alone"


def test_timers_are_ordered_by_time_and_scanned_by_range(store: StateStore) -> None:
    txn = store.begin()
    txn.set_timer(timer(b"b", "w", 30))
    txn.set_timer(timer(b"a", "w", 10))
    txn.set_timer(timer(b"c", "w", -5))
    txn.set_timer(timer(b"a", "x", 20))
    txn.set_timer(timer(b"z", "w", 15, PROC))
    txn.commit()
    assert [t.time_ms for t in store.due_timers(EVENT, None)] == [-5, 10, 20, 30]
    assert store.due_timers(EVENT, 20) == [
        timer(b"c", "w", -5),
        timer(b"a", "w", 10),
        timer(b"a", "x", 20),
    ]
    assert store.due_timers(EVENT, 9) == [timer(b"c", "w", -5)]
    assert store.due_timers(PROC, 100) == [timer(b"z", "w", 15, PROC)]
    assert store.next_timer_ms(EVENT) == -5
    assert store.pending_timers == 5


def test_setting_a_timer_again_moves_it(factory: StoreFactory) -> None:
    store = factory.open()
    txn = store.begin()
    txn.set_timer(timer(b"k", "w", 10))
    txn.commit()
    move = store.begin()
    assert move.get_timer(EVENT, b"k", "w") == 10
    move.set_timer(timer(b"k", "w", 50))
    assert move.get_timer(EVENT, b"k", "w") == 50
    move.commit()
    assert store.due_timers(EVENT, None) == [timer(b"k", "w", 50)]
    assert store.pending_timers == 1
    store = factory.reopen()
    assert store.get_timer(EVENT, b"k", "w") == 50
    assert store.pending_timers == 1


def test_deleting_timers(store: StateStore) -> None:
    txn = store.begin()
    txn.set_timer(timer(b"k", "w", 10))
    txn.set_timer(timer(b"k", "v", 11))
    txn.commit()
    delete = store.begin()
    delete.delete_timer(EVENT, b"k", "w")
    delete.delete_timer(EVENT, b"missing", "w")
    assert delete.get_timer(EVENT, b"k", "w") is None
    delete.commit()
    assert store.due_timers(EVENT, None) == [timer(b"k", "v", 11)]
    assert store.pending_timers == 1


def test_timer_keys_with_awkward_bytes(store: StateStore) -> None:
    keys = [b"", b"\x00", b"\xff\xff", b"a" * 300]
    txn = store.begin()
    for i, key in enumerate(keys):
        txn.set_timer(timer(key, "tag/with:chars", 100 + i))
    txn.commit()
    assert [t.key for t in store.due_timers(EVENT, None)] == keys


def test_outbox_add_remove_and_scan_on_reopen(factory: StoreFactory) -> None:
    store = factory.open()
    txn = store.begin()
    for i in range(5):
        txn.add_outbox(f"p{i}".encode(), f"payload{i}".encode())
    txn.commit()
    ack = store.begin()
    ack.remove_outbox(b"p1")
    ack.remove_outbox(b"p3")
    ack.remove_outbox(b"never-added")
    ack.commit()
    assert store.outbox_count() == 3
    store = factory.reopen()
    assert list(store.outbox()) == [
        (b"p0", b"payload0"),
        (b"p2", b"payload2"),
        (b"p4", b"payload4"),
    ]
    assert store.outbox_count() == 3


def test_metadata_round_trip(factory: StoreFactory) -> None:
    store = factory.open()
    txn = store.begin()
    txn.set_meta("offset", b"42")
    txn.set_meta("epoch", b"user metadata never clashes with the store's own")
    txn.commit()
    store = factory.reopen()
    assert store.get_meta("offset") == b"42"
    assert store.owner_epoch == 0
    removal = store.begin()
    removal.delete_meta("offset")
    removal.commit()
    assert store.get_meta("offset") is None


def test_one_commit_spans_every_column_family(factory: StoreFactory) -> None:
    store = factory.open()
    txn = store.begin(epoch=4)
    txn.put(b"s", b"1")
    txn.mark_seen([b"r" * 16])
    txn.set_timer(timer(b"k", "t", 7))
    txn.add_outbox(b"p", b"x")
    txn.set_meta("m", b"v")
    txn.commit()
    store = factory.reopen()
    assert store.get(b"s") == b"1"
    assert store.begin().seen([b"r" * 16]) == [True]
    assert store.get_timer(EVENT, b"k", "t") == 7
    assert list(store.outbox()) == [(b"p", b"x")]
    assert store.get_meta("m") == b"v"
    assert store.owner_epoch == 4
