"""Keys written once and deleted soon after do not leave files behind (real RocksDB).

Outbox frames are written in increasing key order and deleted once acknowledged,
usually before the memtable is flushed: the flush then writes their tombstones alone,
in a file that overlaps no older one, and RocksDB moves it down to the last level as
it is, one file (and one open file) more per flush, for good (the soak found it in a
join node's store). ``StateStore.compact_deletions``, which each interval's worker
runs every few minutes, rewrites those columns and drops the tombstones.
"""

from __future__ import annotations

from pathlib import Path

from millrace.statestore import StateStore
from millrace.statestore._engine import Column
from tests.support import STATE, fill_outbox_with_tombstone_files


def test_acknowledged_frames_leave_no_files_behind(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "store")
    try:
        fill_outbox_with_tombstone_files(store)
        # The outbox column's own files: the others' come and go with background
        # compactions (the state column's level-0 files), whatever the outbox does.
        left = store._engine.file_count(Column.OUTBOX)
        assert left > 12, "the tombstone files this test is about were not made"
        store.compact_deletions()
        files = store._engine.file_count(Column.OUTBOX)
        assert files <= 1, f"{files} SST files left for an empty outbox (from {left})"
        assert store.outbox_count() == 0
        txn = store.begin()
        assert txn.get(b"state-3") == STATE  # the other columns keep their data
    finally:
        store.close()
