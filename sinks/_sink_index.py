"""``SinkIndex``: what a sink remembers of its output, on disk beside it.

A sink must know every record id it may be sent again (to acknowledge it as a
duplicate), the latest record of each key (``View``) and where each position is
(``Subscribe``). Held in memory that grows with every record (~160 bytes each: a
sink fed 1,000 records/s needed ~14 GB after a day). Here it lives in a RocksDB
store (``statestore``) in ``.NAME.index`` beside the output, with memory bounded:

- **record ids**: the nodes' own dedup index (time-segmented Bloom filters in
  memory, the ids on disk, one multi-get per batch for the Bloom's "maybe"s). A
  segment is forgotten only once it is older than the retention *and* every
  numbered sender (a node interval's outbox, a source stream's log) reported a
  floor past what it delivered into it: ids a sender can still resend stay,
  however old; only those of unnumbered senders (clients delivering by hand) go
  after the retention alone;
- **the latest position per key** (state): grows with the keys, not the records;
- **a checkpoint every** :data:`CHECKPOINT_EVERY` **positions**: where that
  position's record is in the output; a read starts at the checkpoint at or below
  it and skips ahead;
- **what it covers**: how many of the output's records it has indexed and where
  they end, committed with the rest.

The output stays the truth and is made durable first; the index follows unsynced,
each commit whole or not at all. On open, whatever the output holds past what the
index covers is indexed again (after a crash: the last few batches; for an output
written before the index existed: all of it, once).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from millrace.statestore import SenderProgress, StateStore, StoreConfig

CHECKPOINT_EVERY = 256
"""Positions between two checkpoints of the output's locations."""

_U64 = struct.Struct(">Q")
_COVERED = "covered"
_LATEST = b"l"
_CHECKPOINT = b"c"


class SinkIndexError(Exception):
    """The index does not belong to the output beside it (its output was replaced)."""


class SinkIndex:
    """The on-disk index of one sink output. Not thread-safe: the sink serializes calls."""

    def __init__(self, path: Path, *, config: StoreConfig | None = None) -> None:
        """Open (creating) the index in directory ``path``."""
        self.path = path
        # No state cache: the index writes a key's latest position with every record and
        # reads one only for a ``View`` call; a write-through cache cost an LRU update
        # per record (an eighth of a busy sink's CPU) to serve reads that hardly come.
        config = replace(config or StoreConfig(sync=False), state_cache_entries=0)
        self._store = StateStore.open_rocksdb(path, config=config)
        covered = self._store.get_meta(_COVERED)
        self.count, self.end = (0, 0) if covered is None else _pair(covered)
        """Records of the output indexed, and where (a byte offset, a part number) the
        last of them ends."""

    def seen(self, record_ids: Sequence[bytes]) -> list[bool]:
        """Per id: is it written in the output (as far as the index covers it)?"""
        txn = self._store.begin()
        try:
            return txn.seen(record_ids)
        finally:
            txn.abort()

    def add(
        self,
        record_ids: Sequence[bytes],
        keys: Sequence[bytes],
        locations: Sequence[int] | None,
        end: int,
        progress: Sequence[SenderProgress] = (),
    ) -> None:
        """Index records just made durable in the output, at positions ``count``,
        ``count + 1``, ...; ``locations[i]`` is where record ``i`` is (for a checkpoint;
        None: the sink finds positions itself),
        ``end`` where the output's records now end; ``progress``: what their deliveries
        said of their senders."""
        txn = self._store.begin()
        first = self.count
        txn.mark_seen(record_ids)
        if progress:
            txn.note_progress(progress)
        positions = map(_U64.pack, range(first, first + len(keys)))
        txn.write_many(zip(map(_LATEST.__add__, keys), positions, strict=True))  # C-level
        if locations is not None:
            start = first + -first % CHECKPOINT_EVERY  # the first multiple of it from first on
            for position in range(start, first + len(keys), CHECKPOINT_EVERY):
                location = locations[position - first]
                txn.put(_CHECKPOINT + _U64.pack(position), _U64.pack(location))
        count = first + len(keys)
        txn.set_meta(_COVERED, _U64.pack(count) + _U64.pack(end))
        txn.commit(sync=False)
        self.count, self.end = count, end

    def note_progress(self, progress: Sequence[SenderProgress]) -> None:
        """Commit (synced) what deliveries without records said of their senders: the
        floors of retired senders, told by their successors."""
        txn = self._store.begin()
        txn.note_progress(progress)
        txn.commit(sync=True)

    def latest(self, key: bytes) -> int | None:
        """The position of the latest record with ``key``."""
        raw = self._store.get(_LATEST + key)
        return None if raw is None else int(_U64.unpack(raw)[0])

    def checkpoint(self, position: int) -> tuple[int, int]:
        """The checkpoint at or below ``position`` (< :attr:`count`): its position and
        where its record is."""
        at = position - position % CHECKPOINT_EVERY
        raw = self._store.get(_CHECKPOINT + _U64.pack(at))
        if raw is None:
            raise SinkIndexError(f"{self.path}: no checkpoint for position {at}")
        return at, int(_U64.unpack(raw)[0])

    def check_output(self, end: int, what: str) -> None:
        """Refuse an output that ends before what the index covers (it was replaced or
        cut by hand): the index would name records that are not there."""
        if end < self.end:
            raise SinkIndexError(
                f"the sink index {self.path} covers {self.count} records ending at {self.end}, "
                f"but {what} ends at {end}: the output was replaced or cut. Remove the index "
                "directory to rebuild it from the output"
            )

    def close(self) -> None:
        """Close the store."""
        self._store.close()


def _pair(raw: bytes) -> tuple[int, int]:
    return int(_U64.unpack_from(raw)[0]), int(_U64.unpack_from(raw, 8)[0])
