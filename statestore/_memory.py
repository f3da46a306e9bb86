"""The in-memory engine: the same semantics as RocksDB, kept in dicts.

For fast unit tests of computations and for the in-process test harness,
which "crashes" a store by dropping every object above the engine and
reopening a new store over the same :class:`MemoryEngine` (what a commit
wrote survives; nothing else does). Never a substitute for RocksDB in
integration tests.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Sequence

from millrace.statestore._engine import Batch, Column
from millrace.statestore.errors import StateStoreError

_Op = tuple[str, Column, bytes, bytes]


class MemoryBatch:
    """Writes recorded in order, applied together by :meth:`MemoryEngine.write`."""

    def __init__(self) -> None:
        self.ops: list[_Op] = []

    def put(self, column: Column, key: bytes, value: bytes) -> None:
        self.ops.append(("put", column, key, value))

    def put_many(self, column: Column, items: Iterable[tuple[bytes, bytes]]) -> None:
        self.ops.extend(("put", column, key, value) for key, value in items)

    def put_keys(self, column: Column, keys: Iterable[bytes], value: bytes) -> None:
        self.ops.extend(("put", column, key, value) for key in keys)

    def delete(self, column: Column, key: bytes) -> None:
        self.ops.append(("delete", column, key, b""))

    def delete_keys(self, column: Column, keys: Iterable[bytes]) -> None:
        self.ops.extend(("delete", column, key, b"") for key in keys)

    def delete_range(self, column: Column, start: bytes, end: bytes) -> None:
        self.ops.append(("delete_range", column, start, end))


class _SortedColumn:
    """A dict plus a sorted key list, so range scans are ordered like RocksDB's."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.keys: list[bytes] = []

    def put(self, key: bytes, value: bytes) -> None:
        if key not in self.values:
            bisect.insort(self.keys, key)
        self.values[key] = value

    def delete(self, key: bytes) -> None:
        if self.values.pop(key, None) is not None:
            del self.keys[bisect.bisect_left(self.keys, key)]

    def delete_range(self, start: bytes, end: bytes) -> None:
        lo = bisect.bisect_left(self.keys, start)
        hi = bisect.bisect_left(self.keys, end)
        for key in self.keys[lo:hi]:
            del self.values[key]
        del self.keys[lo:hi]


class MemoryEngine:
    """Column families in memory; writes are atomic under one lock."""

    def __init__(self) -> None:
        self.description = "memory"
        self._columns = {column: _SortedColumn() for column in Column}
        self._lock = threading.Lock()

    def get(self, column: Column, key: bytes) -> bytes | None:
        return self._columns[column].values.get(key)

    def multi_get(self, column: Column, keys: Sequence[bytes]) -> list[bytes | None]:
        values = self._columns[column].values
        return [values.get(key) for key in keys]

    def scan(
        self, column: Column, start: bytes, end: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        # A stretch at a time, each under the lock: a scan that stops early (a limit)
        # costs what it read, not the whole range.
        position = start
        while True:
            with self._lock:
                col = self._columns[column]
                lo = bisect.bisect_left(col.keys, position)
                hi = len(col.keys) if end is None else bisect.bisect_left(col.keys, end)
                stretch = [(key, col.values[key]) for key in col.keys[lo : min(hi, lo + 256)]]
            yield from stretch
            if lo + 256 >= hi:
                return
            position = stretch[-1][0] + b"\x00"

    def estimate_rows(self, column: Column) -> int:
        return len(self._columns[column].values)

    def file_count(self, column: Column) -> int:
        return 0

    def compact(self, column: Column) -> None:
        pass  # nothing left behind in memory

    def checkpoint(self, directory: str) -> None:
        raise StateStoreError(f"an in-memory store has no checkpoint (asked for {directory})")

    def new_batch(self) -> MemoryBatch:
        return MemoryBatch()

    def write(self, batch: Batch, *, sync: bool) -> None:
        assert isinstance(batch, MemoryBatch), "a batch from another engine"
        del sync  # memory has nothing to flush
        with self._lock:
            for op, column, key, value in batch.ops:
                col = self._columns[column]
                if op == "put":
                    col.put(key, value)
                elif op == "delete":
                    col.delete(key)
                else:
                    col.delete_range(key, value)

    def sync(self) -> None:
        """Memory has nothing to flush."""

    def close(self) -> None:
        """Nothing to release: the data stays for a later reopen."""
