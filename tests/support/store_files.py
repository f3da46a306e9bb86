"""A store whose outbox holds only files of tombstones, as a node's does between
compactions (for the tests of ``StateStore.compact_deletions``)."""

from __future__ import annotations

from millrace.statestore import StateStore

STATE = b"s" * (256 << 10)


def fill_outbox_with_tombstone_files(store: StateStore, rounds: int = 1_200) -> None:
    """Write as a node does: state fills the WAL, so RocksDB flushes the small outbox
    memtable (which holds the oldest WAL) again and again, each time with a few frames
    already acknowledged: tombstones alone, one file per flush (about 20 here)."""
    for seq in range(rounds):
        txn = store.begin()
        txn.put(b"state-%d" % (seq % 64), STATE)
        txn.commit(sync=False)
        if seq % 16 == 0:
            key = b"\x00" + seq.to_bytes(8, "big")
            txn = store.begin()
            txn.add_outbox(key, b"frame")
            txn.commit(sync=False)
            txn = store.begin()
            txn.remove_outbox(key)
            txn.commit(sync=False)
