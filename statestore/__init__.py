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

from millrace.statestore._keys import prefix_end
from millrace.statestore._memory import MemoryEngine
from millrace.statestore.config import StoreConfig
from millrace.statestore.errors import (
    EpochFencedError,
    IncompatibleStoreError,
    StateStoreError,
    StoreClosedError,
    StoreCorruptedError,
    StoreLockedError,
    StoreWriteError,
    TransactionStateError,
)
from millrace.statestore.store import Clock, StateStore, monotonic_ms, wall_clock_ms
from millrace.statestore.transaction import Transaction, TransactionStatus
from millrace.statestore.types import MAX_EPOCH, DedupStats, SenderProgress, TimeDomain, Timer

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
