"""The RocksDB engine, through rocksdict in raw (bytes-only) mode.

One store is one RocksDB directory with a column family per :class:`Column`.
A :class:`RocksBatch` is one rocksdict ``WriteBatch`` spanning all column
families, applied by a single ``db.write``: RocksDB logs it as one WAL
record, so a crash at any instant leaves all of it or none of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat, starmap
from operator import itemgetter
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    BottommostLevelCompaction,
    Checkpoint,
    ColumnFamily,
    CompactOptions,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from millrace.statestore._engine import Batch, Column
from millrace.statestore.errors import StateStoreError, StoreCorruptedError, StoreLockedError

# Small memtables stay in CPU cache: inserting a 2,000-key batch of random keys
# takes half the time of the 64 MiB default (bench/statestore_bench.py).
_WRITE_BUFFER_BYTES = 4 << 20
_MAX_TOTAL_WAL_BYTES = 16 << 20
_INFO_LOG_BYTES = 1 << 20
_INFO_LOGS_KEPT = 3


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_write_buffer_size(_WRITE_BUFFER_BYTES)
    # Reuse old WAL files: overwriting in place keeps the file size, so the WAL
    # fdatasync of every commit need not wait for a metadata (journal) write:
    # ~0.13 ms instead of ~0.22 ms per sync on this machine. Recycled records
    # carry their log number, so a crash never replays a stale one.
    options.set_recycle_log_file_num(4)
    # A column family written rarely (timers or the outbox of a computation that has
    # none, a sink index's state) keeps its memtable, and with it every WAL file since
    # its first write, for a long time: the soak saw a sink index's WALs grow steadily.
    # Past this total, RocksDB flushes the column families holding the oldest WAL.
    options.set_max_total_wal_size(_MAX_TOTAL_WAL_BYTES)
    # RocksDB's own info log (LOG) records every flush and compaction, about 0.7 MiB a
    # minute for a busy interval, and by default is rolled only at an open and kept
    # (1,000 old files): the 30-minute soak's stores held 21 MiB of LOG files, growing.
    options.set_max_log_file_size(_INFO_LOG_BYTES)
    options.set_keep_log_file_num(_INFO_LOGS_KEPT)
    # Whole-key Bloom filters on every SST: a read of a key that is not there (a new
    # window, a first-seen key) skips the files instead of searching each one.
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


_FIRST = itemgetter(0)


class RocksBatch:
    """A rocksdict ``WriteBatch`` addressed by :class:`Column`.

    The bulk calls put their keys in key order. RocksDB inserts a batch into its
    memtable (a skip list) one key at a time, remembering where the last insert
    went: keys in order land near each other, keys in hash order (state and timer
    keys) each walk the list from the top. Sorting costs ~0.1 us a key and saves more
    in ``db.write`` once batches are large (a node's group commits of a few thousand
    records: ~9% of the engine's CPU at 4,000 a commit, BENCHMARKS.md).
    The sort is stable, so a key given twice in one call keeps its last value; calls
    stay in their order, and a batch is applied atomically whatever its order.
    """

    def __init__(self, handles: tuple[ColumnFamily, ...]) -> None:
        self._handles = handles
        self.batch = WriteBatch(raw_mode=True)

    def put(self, column: Column, key: bytes, value: bytes) -> None:
        self.batch.put(key, value, self._handles[column])

    def put_many(self, column: Column, items: Iterable[tuple[bytes, bytes]]) -> None:
        # C-level loops, as put_keys.
        ordered = sorted(items, key=_FIRST)
        deque(starmap(self._put_into(column), ordered), 0)

    def put_keys(self, column: Column, keys: Iterable[bytes], value: bytes) -> None:
        # A C-level loop: one call per key, no Python frame per key.
        deque(map(self._put_into(column), sorted(keys), repeat(value)), 0)

    def delete(self, column: Column, key: bytes) -> None:
        self.batch.delete(key, self._handles[column])

    def delete_keys(self, column: Column, keys: Iterable[bytes]) -> None:
        self.batch.set_default_column_family(self._handles[column])
        deque(map(self.batch.delete, sorted(keys)), maxlen=0)

    def _put_into(self, column: Column) -> Callable[[bytes, bytes], None]:
        """The batch's ``put`` into ``column``, made its default: a call without the
        column family argument costs ~40% less (68 -> 42 ns a key). Every single-key
        call names its column family, so the default never leaks into one."""
        self.batch.set_default_column_family(self._handles[column])
        put: Callable[[bytes, bytes], None] = self.batch.put
        return put

    def delete_range(self, column: Column, start: bytes, end: bytes) -> None:
        self.batch.delete_range(start, end, self._handles[column])

    def release(self) -> None:
        """Drop the column-family handles: each one keeps the database (and its lock) open."""
        self._handles = ()
        self.batch = WriteBatch(raw_mode=True)


class RocksDBEngine:
    """A RocksDB directory holding one store."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.description = f"rocksdb:{self.path}"
        Path(self.path).mkdir(parents=True, exist_ok=True)
        families = {column.family: _options() for column in Column}
        try:
            self._db = Rdict(self.path, _options(), column_families=families)
        except Exception as exc:  # rocksdict raises bare Exception with RocksDB's status text
            raise _translate_open_error(self.path, exc) from exc
        self._columns = tuple(self._db.get_column_family(column.family) for column in Column)
        self._handles = tuple(self._db.get_column_family_handle(column.family) for column in Column)
        self._nosync = WriteOptions()

    def get(self, column: Column, key: bytes) -> bytes | None:
        value: bytes | None = self._columns[column].get(key)
        return value

    def multi_get(self, column: Column, keys: Sequence[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        values = self._columns[column].get(list(keys))
        assert isinstance(values, list)
        return values

    def scan(
        self, column: Column, start: bytes, end: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        read = ReadOptions()
        if end is not None:
            read.set_iterate_upper_bound(end)
        it = self._columns[column].iter(read)
        it.seek(start)
        while it.valid():
            yield it.key(), it.value()
            it.next()

    def estimate_rows(self, column: Column) -> int:
        return int(self._columns[column].property_int_value("rocksdb.estimate-num-keys") or 0)

    def file_count(self, column: Column) -> int:
        family = self._columns[column]
        return sum(
            int(family.property_int_value(f"rocksdb.num-files-at-level{level}") or 0)
            for level in range(7)
        )

    def compact(self, column: Column) -> None:
        # Down to the last level included: RocksDB's own compactions never rewrite a
        # last-level file that no newer file overlaps, whatever tombstones it holds.
        options = CompactOptions()
        options.set_bottommost_level_compaction(BottommostLevelCompaction.force())
        self._columns[column].compact_range(None, None, options)

    def checkpoint(self, directory: str) -> None:
        # RocksDB's checkpoint: table files hard-linked (immutable), the rest copied,
        # the memtable flushed first, all synced.
        Checkpoint(self._db).create_checkpoint(directory)

    def new_batch(self) -> RocksBatch:
        return RocksBatch(self._handles)

    def write(self, batch: Batch, *, sync: bool) -> None:
        assert isinstance(batch, RocksBatch), "a batch from another engine"
        try:
            # rocksdict holds the GIL for all of ``write``, fsync included, but releases
            # it in ``flush_wal``: write to the WAL unsynced, then sync the WAL, so the
            # process's other threads (gRPC, senders) run during the disk wait. The
            # caller acks only after this returns, so durability is the same.
            self._db.write(batch.batch, self._nosync)
            if sync:
                self.sync()
        finally:
            batch.release()

    def sync(self) -> None:
        self._db.flush_wal(True)  # syncs the WAL without holding the GIL

    def close(self) -> None:
        for family in self._columns:
            family.close()
        self._columns = ()
        self._handles = ()
        self._db.close()
        del self._db


def _translate_open_error(path: str, exc: Exception) -> StateStoreError:
    text = str(exc)
    if "lock" in text.lower():
        return StoreLockedError(path, text)
    if "corrupt" in text.lower():
        return StoreCorruptedError(path, text)
    return StateStoreError(f"cannot open state store {path!r}: {text}")
