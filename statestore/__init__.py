"""Exactly-once storage for one key interval: state, dedup ids, timers, outbox, metadata.

Usage::

    store = StateStore.open_rocksdb("data/counts-0", config=StoreConfig(sync=True))
    txn = store.begin(epoch=3)
    fresh = [rid for rid, dup in zip(ids, txn.seen(ids)) if not dup]
    txn.put(b"count:alice", b"42")
    txn.mark_seen(fresh)
    txn.set_timer(Timer(domain=TimeDomain.EVENT_TIME, key=b"alice", tag="w", time_ms=60_000))
    txn.add_outbox(production_id, payload)
    txn.commit()   # one RocksDB WriteBatch, one db.write

The in-memory backend (:meth:`StateStore.open_memory`) has the same API and
passes the same contract tests.
"""

from statestore._keys import prefix_end
from statestore._memory import MemoryEngine
from statestore.config import StoreConfig
from statestore.errors import (
    EpochFencedError,
    IncompatibleStoreError,
    StateStoreError,
    StoreClosedError,
    StoreCorruptedError,
    StoreLockedError,
    StoreWriteError,
    TransactionStateError,
)
from statestore.store import Clock, StateStore, monotonic_ms, wall_clock_ms
from statestore.transaction import Transaction, TransactionStatus
from statestore.types import MAX_EPOCH, DedupStats, SenderProgress, TimeDomain, Timer

__all__ = [
    "MAX_EPOCH",
    "Clock",
    "DedupStats",
    "EpochFencedError",
    "IncompatibleStoreError",
    "MemoryEngine",
    "SenderProgress",
    "StateStore",
    "StateStoreError",
    "StoreClosedError",
    "StoreConfig",
    "StoreCorruptedError",
    "StoreLockedError",
    "StoreWriteError",
    "TimeDomain",
    "Timer",
    "Transaction",
    "TransactionStateError",
    "TransactionStatus",
    "monotonic_ms",
    "prefix_end",
    "wall_clock_ms",
]
