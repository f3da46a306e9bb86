"""A transaction over one store: buffered changes, committed as one atomic write.

Call order: :meth:`StateStore.begin` -> reads, :meth:`Transaction.seen`,
buffered writes -> :meth:`Transaction.commit` (or :meth:`Transaction.abort`).
Reads see the transaction's own buffered writes. Nothing reaches the engine
before ``commit``, and ``commit`` writes everything in one engine batch.
"""

from __future__ import annotations

import enum
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from itertools import islice

from millrace.statestore import _keys
from millrace.statestore._engine import Batch, Column
from millrace.statestore._store_view import StoreView
from millrace.statestore._timer_index import TimerId
from millrace.statestore.dedup import StagedIds
from millrace.statestore.errors import StateStoreError, StoreWriteError, TransactionStateError
from millrace.statestore.types import SenderProgress, TimeDomain, Timer


class TransactionStatus(enum.Enum):
    """OPEN -> COMMITTED | FAILED. Only an open transaction accepts calls."""

    OPEN = "open"
    COMMITTED = "committed"
    FAILED = "failed"


class Transaction:
    """Buffered state, dedup-id, timer, outbox and metadata changes of one owner epoch."""

    def __init__(self, store: StoreView, epoch: int) -> None:
        self._store = store
        self._epoch = epoch
        self._status = TransactionStatus.OPEN
        self._open = True  # the hot-path check: an enum comparison costs 7x a bool
        self._state: dict[bytes, bytes | None] = {}
        self._state_order: list[bytes] | None = None
        """The keys of ``_state`` in order, kept once a scan needed them (see
        :meth:`scan_state`)."""
        self._seen: dict[bytes, None] = {}
        self._marks: list[SenderProgress] = []
        self._timers: dict[TimerId, Timer | None] = {}
        self._outbox: dict[bytes, bytes | None] = {}
        self._meta: dict[str, bytes | None] = {}

    @property
    def status(self) -> TransactionStatus:
        """Where the transaction is in its life."""
        return self._status

    @property
    def epoch(self) -> int:
        """The owner epoch this transaction commits under."""
        return self._epoch

    def _require_open(self) -> None:
        if not self._open:
            raise TransactionStateError(
                f"transaction is {self._status.value}; begin a new transaction"
            )

    def _end(self, status: TransactionStatus) -> None:
        self._status = status
        self._open = False

    # -- state ------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value of a state key as this transaction sees it."""
        self._require_open()
        if key in self._state:
            return self._state[key]
        return self._store.get(key)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of many state keys as this transaction sees them (one store read)."""
        self._require_open()
        own = self._state
        values = self._store.get_many(keys)
        if own:
            values = [own.get(k, v) for k, v in zip(keys, values, strict=True)]
        return values

    def put(self, key: bytes, value: bytes) -> None:
        """Set a state key."""
        self._require_open()
        if self._state_order is not None and key not in self._state:
            insort(self._state_order, key)
        self._state[key] = value

    def write_many(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Set many state keys (a None value deletes its key)."""
        self._require_open()
        self._state.update(entries)
        self._state_order = None

    def delete(self, key: bytes) -> None:
        """Remove a state key."""
        self._require_open()
        if self._state_order is not None and key not in self._state:
            insort(self._state_order, key)
        self._state[key] = None

    def scan_state(
        self, start: bytes, end: bytes | None, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        """The first ``limit`` (None: all) state entries with ``start <= key < end``
        (None: no end) as this transaction sees them, in key order: one range read of
        the store, merged with this transaction's own changes (their keys kept in order
        once scanned, so a scan costs what it reads, not the transaction's size)."""
        self._require_open()
        committed = self._store.scan_state_range(start, end)
        own: list[bytes] = []
        if self._state:
            order = self._state_order
            if order is None:
                order = self._state_order = sorted(self._state)
            low = bisect_left(order, start)
            high = len(order) if end is None else bisect_left(order, end, low)
            own = order[low:high]
        if not own:
            return list(committed if limit is None else islice(committed, limit))
        state = self._state
        found: list[tuple[bytes, bytes]] = []
        stored = next(committed, None)
        at = 0
        while (stored is not None or at < len(own)) and (limit is None or len(found) < limit):
            if at < len(own) and (stored is None or own[at] <= stored[0]):
                key = own[at]
                at += 1
                if stored is not None and stored[0] == key:
                    stored = next(committed, None)  # this transaction's value wins
                if (value := state[key]) is not None:
                    found.append((key, value))
            else:
                assert stored is not None
                found.append(stored)
                stored = next(committed, None)
        return found

    # -- dedup ------------------------------------------------------------

    def seen(self, record_ids: Sequence[bytes]) -> list[bool]:
        """Per id: was it committed before, or marked in this transaction?"""
        self._require_open()
        if not self._seen or self._seen.keys().isdisjoint(record_ids):  # the usual call
            if not record_ids:
                return []
            positions = self._store._dedup.positions(record_ids)
            return self._store._lookup_ids(record_ids, positions)
        result = [record_id in self._seen for record_id in record_ids]
        unknown = [record_id for record_id, hit in zip(record_ids, result, strict=True) if not hit]
        if unknown:
            positions = self._store._dedup.positions(unknown)
            stored = iter(self._store._lookup_ids(unknown, positions))
            result = [hit or next(stored) for hit in result]
        return result

    def mark_seen(self, record_ids: Iterable[bytes]) -> None:
        """Record ids to remember as processed when this transaction commits."""
        self._require_open()
        marked = dict.fromkeys(record_ids)
        if self._seen:
            self._seen.update(marked)
        else:  # the usual single call: the dict made is the set kept
            self._seen = marked

    def note_progress(self, marks: Iterable[SenderProgress]) -> None:
        """What the deliveries of this commit said of their senders' progress: their ids
        are kept until every such sender's floor passes what it delivered."""
        self._require_open()
        self._marks.extend(marks)

    # -- timers -----------------------------------------------------------

    def set_timer(self, timer: Timer) -> None:
        """Set (or move) the timer ``(timer.domain, timer.key, timer.tag)``."""
        self._require_open()
        self._timers[(timer.domain, timer.key, timer.tag)] = timer

    def delete_timer(self, domain: TimeDomain, key: bytes, tag: str) -> None:
        """Remove a timer; no error when it does not exist."""
        self._require_open()
        self._timers[(domain, key, tag)] = None

    def get_timer(self, domain: TimeDomain, key: bytes, tag: str) -> int | None:
        """The time a timer is set for, or None."""
        self._require_open()
        ident = (domain, key, tag)
        if ident in self._timers:
            timer = self._timers[ident]
            return None if timer is None else timer.time_ms
        return self._store.get_timer(domain, key, tag)

    # -- outbox and metadata ----------------------------------------------

    def add_outbox(self, production_id: bytes, payload: bytes) -> None:
        """Checkpoint a production to send; it stays until :meth:`remove_outbox` commits."""
        self._require_open()
        self._outbox[production_id] = payload

    def remove_outbox(self, production_id: bytes) -> None:
        """Forget an acknowledged production."""
        self._require_open()
        self._outbox[production_id] = None

    def set_meta(self, name: str, value: bytes) -> None:
        """Set a metadata entry (offsets, watermarks: anything that must move with state)."""
        self._require_open()
        self._meta[name] = value

    def get_meta(self, name: str) -> bytes | None:
        """A metadata entry as this transaction sees it."""
        self._require_open()
        if name in self._meta:
            return self._meta[name]
        return self._store.get_meta(name)

    def delete_meta(self, name: str) -> None:
        """Remove a metadata entry."""
        self._require_open()
        self._meta[name] = None

    # -- end of life ------------------------------------------------------

    def abort(self) -> None:
        """Drop every buffered change; the transaction becomes FAILED."""
        self._require_open()
        self._end(TransactionStatus.FAILED)

    def commit(self, *, sync: bool | None = None) -> None:
        """Write every buffered change in ONE engine write batch, then mark COMMITTED.

        State puts/deletes, the marked record ids (plus range deletes of expired
        dedup segments), timer moves, outbox changes, metadata and a raised
        owner epoch all go into a single RocksDB ``WriteBatch`` applied by one
        ``db.write``: after a crash at any instant either all of it is in the
        store or none of it is. With ``sync`` on, it is fsynced before this
        returns (``sync`` overrides the store's setting for this commit: deleting
        acknowledged outbox entries, say, needs no fsync). A commit whose epoch
        is older than the store's owner epoch
        raises :class:`~statestore.errors.EpochFencedError` and writes nothing.
        Any failure leaves the transaction FAILED; it can never commit.
        """
        self._require_open()
        store = self._store
        try:
            store._require_open()
            store._check_epoch(self._epoch)
            batch = store._engine.new_batch()
            now_ms = store.dedup_now()
            state = self._state
            batch.put_many(Column.STATE, [(k, v) for k, v in state.items() if v is not None])
            batch.delete_keys(Column.STATE, [k for k, v in state.items() if v is None])
            staged = self._stage_ids(batch, now_ms)
            self._stage_timers(batch)
            self._stage_outbox(batch)
            for name, meta in self._meta.items():
                if meta is None:
                    batch.delete(Column.META, _keys.user_meta_key(name))
                else:
                    batch.put(Column.META, _keys.user_meta_key(name), meta)
            if self._epoch > store.owner_epoch:
                store._stage_epoch(batch, self._epoch)
            store._write(batch, sync=store.config.sync if sync is None else sync)
        except StateStoreError:
            self._end(TransactionStatus.FAILED)
            raise
        except Exception as exc:
            self._end(TransactionStatus.FAILED)
            raise StoreWriteError(f"commit to {store.description} failed: {exc}") from exc
        except BaseException:
            self._end(TransactionStatus.FAILED)
            raise
        store._committed(self._epoch, staged, self._timers, self._state)
        self._end(TransactionStatus.COMMITTED)

    def _stage_ids(self, batch: Batch, now_ms: int) -> StagedIds | None:
        dedup = self._store._dedup
        if not self._seen and not self._marks and not dedup.has_expired(now_ms):
            return None
        ids = list(self._seen)
        self._store._stage_dedup_clock(batch, now_ms)
        # Hashing again costs less than remembering seen()'s rows per id (native xxh3).
        return dedup.stage(batch, ids, dedup.positions(ids), now_ms, self._marks)

    def _stage_timers(self, batch: Batch) -> None:
        if self._timers:
            self._store._stage_timers(batch, self._timers)

    def _stage_outbox(self, batch: Batch) -> None:
        # No existence reads here: the caller (the node's processor) tracks its
        # live outbox keys in memory, and a read per production costs ~20% of a commit.
        for production_id, payload in self._outbox.items():
            if payload is None:
                batch.delete(Column.OUTBOX, production_id)
            else:
                batch.put(Column.OUTBOX, production_id, payload)
