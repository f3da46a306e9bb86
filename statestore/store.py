"""``StateStore``: the exactly-once storage of one key interval.

Open it over RocksDB (:meth:`StateStore.open_rocksdb`) or memory
(:meth:`StateStore.open_memory`); both run the same code above the engine.
Opening checks the format (``_format.py``), loads the owner epoch and counters, and
rebuilds the dedup Bloom filters from the stored ids. A store is driven by one thread
at a time (the interval's worker); it does no locking of its own.

Dedup retention runs on the store's own clock: the time the store has been
open, carried across restarts (committed with the ids), taken from the
monotonic clock by default. Neither a wall-clock step (NTP, a resumed VM) nor
the time a node was down ages a record id.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from types import TracebackType

from millrace.dataplane import StateCache
from millrace.statestore import _keys
from millrace.statestore._bloom import Positions
from millrace.statestore._engine import Batch, Column, Engine
from millrace.statestore._format import check_format_and_seed, drop_legacy_timer_entries
from millrace.statestore._memory import MemoryEngine
from millrace.statestore._timer_index import TimerId, TimerIndex
from millrace.statestore.config import StoreConfig
from millrace.statestore.dedup import DedupIndex, StagedIds
from millrace.statestore.errors import (
    EpochFencedError,
    StateStoreError,
    StoreClosedError,
)
from millrace.statestore.transaction import Transaction
from millrace.statestore.types import MAX_EPOCH, DedupStats, TimeDomain, Timer

Clock = Callable[[], int]
"""Returns a time in integer milliseconds; the store uses only its differences."""

_ABSORBED_PER_WRITE = 20_000
"""Entries per write when a store absorbs another."""
_EPOCH = _keys.reserved_meta_key("epoch")
_DEDUP_CLOCK = _keys.reserved_meta_key("dedup-clock")
_I64 = struct.Struct(">q")


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch from the system clock."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds of the monotonic clock (never stepped; meaningful only as differences)."""
    return time.monotonic_ns() // 1_000_000


class StateStore:
    """State, dedup ids, timers, outbox and metadata of one key interval."""

    def __init__(
        self,
        engine: Engine,
        *,
        config: StoreConfig | None = None,
        clock: Clock = monotonic_ms,
        for_transactions: bool = True,
    ) -> None:
        """``for_transactions`` False: the record ids are not read back (the slow part of
        opening a big store), so no transaction may begin; :meth:`checkpoint` and
        :meth:`drop` still work (a split cuts copies of a store so)."""
        self._engine = engine
        self.config = config or StoreConfig()
        self._clock = clock
        self._closed = False
        seed = check_format_and_seed(engine)
        raw_epoch = engine.get(Column.META, _EPOCH)
        self._owner_epoch: int = 0 if raw_epoch is None else _I64.unpack(raw_epoch)[0]
        self._dedup = DedupIndex(engine, self.config, seed=seed)
        self._opened_at = clock()
        self._dedup_base = self._load_dedup_clock(engine)
        self._for_transactions = for_transactions
        self.recovered_ids = self._dedup.rebuild(self.dedup_now()) if for_transactions else 0
        drop_legacy_timer_entries(engine)
        self._timers = TimerIndex.load(engine)
        self._cache = self._new_cache()

    def _new_cache(self) -> StateCache | None:
        """An empty write-through cache of state (None when configured off)."""
        limit = self.config.state_cache_entries
        return StateCache(limit) if limit > 0 else None

    @classmethod
    def open_rocksdb(
        cls,
        path: str | Path,
        *,
        config: StoreConfig | None = None,
        clock: Clock = monotonic_ms,
        for_transactions: bool = True,
    ) -> StateStore:
        """Open (creating if needed) the store in directory ``path`` (``for_transactions``:
        see :class:`StateStore`)."""
        # Imported here so that computations (and Spark executors) can use the
        # memory backend without rocksdict installed.
        from millrace.statestore._rocksdb import RocksDBEngine

        engine = RocksDBEngine(path)
        try:
            return cls(engine, config=config, clock=clock, for_transactions=for_transactions)
        except BaseException:
            engine.close()
            raise

    @classmethod
    def open_memory(
        cls,
        engine: MemoryEngine | None = None,
        *,
        config: StoreConfig | None = None,
        clock: Clock = monotonic_ms,
    ) -> StateStore:
        """A store in memory; pass the engine of a previous store to "reopen" it."""
        return cls(engine or MemoryEngine(), config=config, clock=clock)

    def dedup_now(self) -> int:
        """The store's own clock (ms): what dedup retention counts. Continues across
        restarts from where the last commit left it; downtime does not count."""
        return self._dedup_base + self._clock() - self._opened_at

    def _load_dedup_clock(self, engine: Engine) -> int:
        stored = engine.get(Column.META, _DEDUP_CLOCK)
        return self._opened_at if stored is None else int(_I64.unpack(stored)[0])

    def _stage_dedup_clock(self, batch: Batch, now_ms: int) -> None:
        batch.put(Column.META, _DEDUP_CLOCK, _I64.pack(now_ms))

    @property
    def description(self) -> str:
        """Where the store lives, for messages."""
        return self._engine.description

    def _require_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"state store {self.description} is closed")

    # -- ownership --------------------------------------------------------

    @property
    def owner_epoch(self) -> int:
        """The newest epoch that claimed or committed to this store."""
        return self._owner_epoch

    def claim_epoch(self, epoch: int) -> None:
        """Make ``epoch`` the owner (durably); older epochs are fenced from now on.

        Raises ``ValueError`` for an epoch at or above :data:`MAX_EPOCH`."""
        self._require_open()
        if not 0 <= epoch < MAX_EPOCH:
            raise ValueError(f"epoch {epoch} is outside 0..{MAX_EPOCH - 1}")
        self._check_epoch(epoch)
        if epoch > self._owner_epoch:
            batch = self._engine.new_batch()
            self._stage_epoch(batch, epoch)
            self._engine.write(batch, sync=True)
            self._owner_epoch = epoch

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self._owner_epoch:
            raise EpochFencedError(epoch, self._owner_epoch)

    def _stage_epoch(self, batch: Batch, epoch: int) -> None:
        batch.put(Column.META, _EPOCH, _I64.pack(epoch))

    # -- transactions -----------------------------------------------------

    def begin(self, epoch: int | None = None) -> Transaction:
        """A new transaction committing under ``epoch`` (default: the current owner)."""
        self._require_open()
        if not self._for_transactions:
            raise StateStoreError(f"{self.description} was opened without its record ids")
        return Transaction(self, self._owner_epoch if epoch is None else epoch)

    def _lookup_ids(self, record_ids: Sequence[bytes], positions: Positions) -> list[bool]:
        self._require_open()
        return self._dedup.lookup(record_ids, positions, self.dedup_now())

    def _write(self, batch: Batch, *, sync: bool) -> None:
        self._require_open()
        self._engine.write(batch, sync=sync)

    def sync(self) -> None:
        """Make every commit so far durable, when the store syncs at all (``config.sync``).

        For callers that pipeline: commit with ``sync=False``, go on working, and act
        on those commits (ack, send) only after this returns. Thread-safe against a
        concurrent commit; the sync then may or may not cover that commit.
        """
        self._require_open()
        if self.config.sync:
            self._engine.sync()

    def _committed(
        self,
        epoch: int,
        staged: StagedIds | None,
        timers: dict[TimerId, Timer | None],
        state: dict[bytes, bytes | None],
    ) -> None:
        if self._cache is not None:
            self._cache.update(state)  # written last: most recent
        if staged is not None:
            self._dedup.apply(staged)
        self._owner_epoch = max(self._owner_epoch, epoch)
        if timers:
            self._timers.apply(timers)

    def _stage_timers(self, batch: Batch, timers: dict[TimerId, Timer | None]) -> None:
        """A transaction's timer changes into its batch (against the committed times)."""
        self._timers.stage(batch, timers)

    # -- reads ------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The committed value of a state key (through the write-through cache)."""
        self._require_open()
        cache = self._cache
        if cache is None:
            return self._engine.get(Column.STATE, key)
        found, value = cache.get(key)
        if not found:
            value = self._engine.get(Column.STATE, key)
            cache.put(key, value)
        return value

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The committed values of many state keys: those not cached in one engine read."""
        self._require_open()
        cache = self._cache
        if cache is None:
            return self._engine.multi_get(Column.STATE, keys)
        keys = keys if isinstance(keys, list) else list(keys)
        values, missing = cache.lookup(keys)
        if missing:
            read = self._engine.multi_get(Column.STATE, [keys[i] for i in missing])
            cache.fill(keys, values, missing, read)
        return values

    def scan_state(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Committed state entries whose key starts with ``prefix``, in key order."""
        self._require_open()
        return self._engine.scan(Column.STATE, prefix, _keys.prefix_end(prefix))

    def scan_state_range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Committed state entries with ``start <= key < end`` (None: no end), in key order."""
        self._require_open()
        return self._engine.scan(Column.STATE, start, end)

    def get_meta(self, name: str) -> bytes | None:
        """A committed metadata entry."""
        self._require_open()
        return self._engine.get(Column.META, _keys.user_meta_key(name))

    def metadata(self) -> dict[str, bytes]:
        """Every committed metadata entry set through transactions (``set_meta``)."""
        self._require_open()
        start = _keys.user_meta_key("")
        return {
            key[len(start) :].decode(): value
            for key, value in self._engine.scan(Column.META, start, _keys.prefix_end(start))
        }

    def get_timer(self, domain: TimeDomain, key: bytes, tag: str) -> int | None:
        """The committed time of a timer, or None."""
        self._require_open()
        return self._timers.time_of((domain, key, tag))

    def due_timers(
        self, domain: TimeDomain, up_to_ms: int | None, limit: int | None = None
    ) -> list[Timer]:
        """Committed timers of ``domain`` with time <= ``up_to_ms``, in time order."""
        self._require_open()
        return self._timers.due(domain, up_to_ms, limit)

    def next_timer_ms(self, domain: TimeDomain) -> int | None:
        """The earliest committed timer time of ``domain``, or None."""
        return self._timers.earliest(domain)

    @property
    def pending_timers(self) -> int:
        """Committed timers of both domains."""
        return len(self._timers)

    def outbox(self) -> Iterator[tuple[bytes, bytes]]:
        """Committed, unacknowledged productions ``(production_id, payload)`` in id order."""
        self._require_open()
        return self._engine.scan(Column.OUTBOX, b"", None)

    def outbox_count(self) -> int:
        """How many productions await acknowledgement (a scan: for tools and tests)."""
        return sum(1 for _ in self.outbox())

    def estimated_rows(self) -> dict[str, int]:
        """About how many rows each column family holds (``state``, ``dedup``, ``timers``,
        ``outbox``, ``meta``): RocksDB's estimate, read without a scan."""
        self._require_open()
        return {column.family: self._engine.estimate_rows(column) for column in Column}

    def live_file_count(self) -> int:
        """How many table files the store holds on disk (RocksDB keeps each one open)."""
        self._require_open()
        return sum(self._engine.file_count(column) for column in Column)

    def compact_deletions(self, max_files: int = 0) -> list[str]:
        """Rewrite the columns whose keys are written once and deleted soon after (the
        outbox's frames, the timers) when they hold more than ``max_files`` files,
        dropping their tombstones; returns the columns rewritten. RocksDB leaves a
        flushed file of tombstones alone once it sits in the last level with no newer
        file over its keys: without this, such a column gains a file (and an open file)
        with every flush, for good. It blocks the caller (not the GIL) about 0.1 s per
        40 MB of live rows in those columns, which usually hold little."""
        self._require_open()
        compacted = []
        for column in (Column.OUTBOX, Column.TIMERS):
            if self._engine.file_count(column) > max_files:
                self._engine.compact(column)
                compacted.append(column.family)
        return compacted

    def checkpoint(self, directory: str | Path) -> None:
        """A consistent copy of every commit so far in ``directory`` (which must not
        exist): RocksDB's checkpoint, table files hard-linked. Open it as a store of its
        own; the copy shares no later write with this one."""
        self._require_open()
        self._engine.checkpoint(str(directory))

    def drop(
        self,
        epoch: int,
        *,
        state_ranges: Sequence[tuple[bytes, bytes]] = (),
        timers: Iterable[TimerId] = (),
        outbox: Iterable[bytes] = (),
        meta: Mapping[str, bytes | None] = {},
    ) -> None:
        """Delete every state entry in each ``[start, end)`` range, the ``timers`` and the
        ``outbox`` entries named, and set (None: delete) the ``meta`` entries, in one
        synced write under ``epoch``. The ranges are RocksDB range deletions, whose cost
        does not grow with what they cover (a store copied for half of a split interval
        drops the other half's)."""
        self._require_open()
        self._check_epoch(epoch)
        batch = self._engine.new_batch()
        for start, end in state_ranges:
            batch.delete_range(Column.STATE, start, end)
        gone: dict[TimerId, Timer | None] = dict.fromkeys(timers)
        self._timers.stage(batch, gone)
        batch.delete_keys(Column.OUTBOX, outbox)
        for name, value in meta.items():
            key = _keys.user_meta_key(name)
            if value is None:
                batch.delete(Column.META, key)
            else:
                batch.put(Column.META, key, value)
        self._stage_epoch(batch, epoch)
        self._engine.write(batch, sync=True)
        self._owner_epoch = max(self._owner_epoch, epoch)
        self._timers.apply(gone)
        self._cache = self._new_cache()

    def absorb(self, other: StateStore, epoch: int) -> None:
        """Take in ``other``'s state entries, timers and record ids -- the store of the
        adjacent half of a key interval merged into this one; not its outbox or
        metadata, which the caller reconciles. The ids go into this store's newest
        segment, with everything ``other``'s senders reported of their progress, so
        they are kept at least as long as ``other`` would have kept them. In several
        writes under ``epoch``, synced at the end: absorb into a copy no one runs yet."""
        self._require_open()
        other._require_open()
        self._check_epoch(epoch)
        for column in (Column.STATE, Column.TIMERS):
            rows = other._engine.scan(column, b"", None)
            while chunk := list(islice(rows, _ABSORBED_PER_WRITE)):
                batch = self._engine.new_batch()
                batch.put_many(column, chunk)
                self._stage_epoch(batch, epoch)
                self._engine.write(batch, sync=False)
        self._owner_epoch = max(self._owner_epoch, epoch)
        self._timers = TimerIndex.load(self._engine)
        self._cache = self._new_cache()
        marks = other._dedup.progress.marks()
        ids = (
            _keys.split_dedup_key(key)[2] for key, _ in other._engine.scan(Column.DEDUP, b"", None)
        )
        while some_ids := list(islice(ids, _ABSORBED_PER_WRITE)):
            txn = self.begin(epoch)
            txn.mark_seen(some_ids)
            txn.note_progress(marks)  # in each: a chunk may start a new segment
            txn.commit(sync=False)
        self._engine.sync()

    def dedup_stats(self) -> DedupStats:
        """Counters of the dedup index."""
        return self._dedup.stats()

    @property
    def dedup(self) -> DedupIndex:
        """The dedup index (filters and counters), for inspection."""
        return self._dedup

    # -- life cycle -------------------------------------------------------

    def close(self) -> None:
        """Release the engine (the RocksDB lock). Idempotent."""
        if not self._closed:
            self._closed = True
            self._engine.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
