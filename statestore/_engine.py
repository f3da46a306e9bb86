"""The storage engine interface under the store: column families, batches, scans.

Two engines implement it: RocksDB (``_rocksdb.py``) and memory
(``_memory.py``). Everything above this interface (transactions, dedup,
timers, fencing) is shared, so both backends behave the same by construction.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol


class Column(enum.IntEnum):
    """The column families of a store (an int, so engines index handles by it cheaply)."""

    STATE = 0
    DEDUP = 1
    TIMERS = 2
    OUTBOX = 3
    META = 4

    @property
    def family(self) -> str:
        """The column family's name on disk."""
        return self.name.lower()


class Batch(Protocol):
    """Writes collected for one atomic :meth:`Engine.write`."""

    def put(self, column: Column, key: bytes, value: bytes) -> None:
        """Set ``key`` to ``value``."""

    def put_many(self, column: Column, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Set many keys (the hot path of group commit)."""

    def put_keys(self, column: Column, keys: Iterable[bytes], value: bytes) -> None:
        """Set many keys to one value (a commit's record ids)."""

    def delete(self, column: Column, key: bytes) -> None:
        """Remove ``key``."""

    def delete_keys(self, column: Column, keys: Iterable[bytes]) -> None:
        """Remove many keys."""

    def delete_range(self, column: Column, start: bytes, end: bytes) -> None:
        """Remove every key in ``[start, end)``."""


class Engine(Protocol):
    """A key-value engine with column families and atomic multi-column writes."""

    description: str

    def get(self, column: Column, key: bytes) -> bytes | None:
        """The value of ``key``, or None."""

    def multi_get(self, column: Column, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys``, in order, None where absent."""

    def scan(
        self, column: Column, start: bytes, end: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``start <= key < end`` (no upper bound when ``end`` is None), in order."""

    def estimate_rows(self, column: Column) -> int:
        """About how many keys ``column`` holds (cheap: RocksDB's own estimate)."""

    def file_count(self, column: Column) -> int:
        """How many table files ``column`` has (cheap: RocksDB's own count)."""

    def compact(self, column: Column) -> None:
        """Rewrite ``column``'s files, dropping what deletions left behind."""

    def new_batch(self) -> Batch:
        """An empty batch for :meth:`write`."""

    def checkpoint(self, directory: str) -> None:
        """A consistent copy of everything written so far, in ``directory`` (which must
        not exist), openable as a store of its own."""

    def write(self, batch: Batch, *, sync: bool) -> None:
        """Apply every write of ``batch`` atomically; ``sync`` fsyncs before returning."""

    def sync(self) -> None:
        """Make every write so far durable (after writes made with ``sync`` off)."""

    def close(self) -> None:
        """Release the engine; later calls fail."""
