"""Bloom filters probed and filled a whole batch of ids at a time, natively.

pybloom-live sizes the filters (slices and bits per slice for a capacity and error
rate, its ``BloomFilter``'s own formula). Hashing and the bits are the native core's
(``native/core/src/bloom.rs``): the 128-bit xxh3 of every id of a batch in one call,
each slice's bit derived from its two 64-bit halves (double hashing, Kirsch and
Mitzenmacher: ``h1 + i * h2``), and the bits of each filter tested and set for the
whole batch.

The filters live in memory only (rebuilt from the dedup column family on open),
so the hash is the process's own: xxh3 is seeded at random per store, so ids
chosen to collide in the filters cannot be computed in advance (a collision only
costs a RocksDB read: a "maybe" is always confirmed).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from pybloom_live import BloomFilter

from millrace.dataplane import BloomBits, BloomPositions
from millrace.dataplane import BloomHasher as _NativeHasher

Positions = BloomPositions
"""Rows of bit positions, one row (a bit per slice) per id."""


@dataclass(frozen=True, slots=True)
class FilterSize:
    """How a store's filters are sized (all alike: an id is hashed once for all)."""

    capacity: int
    num_slices: int
    bits_per_slice: int

    @classmethod
    def of(cls, capacity: int, error_rate: float) -> FilterSize:
        """pybloom-live's sizing for ``capacity`` ids at ``error_rate`` false positives."""
        template = BloomFilter(capacity=capacity, error_rate=error_rate)
        return cls(capacity, template.num_slices, template.bits_per_slice)


class BloomHasher:
    """Ids -> bit positions in filters of ``size``."""

    def __init__(self, size: FilterSize, seed: int | None = None) -> None:
        """``seed``: of the xxh3 hash (random when None; hashers agree only on the same)."""
        seed = secrets.randbits(64) if seed is None else seed
        self._native = _NativeHasher(size.num_slices, size.bits_per_slice, seed)

    def positions(self, record_ids: Sequence[bytes]) -> Positions:
        """One row per id: slice ``i``'s absolute bit, ``(h1 + i * h2) mod
        bits_per_slice`` plus ``i * bits_per_slice``."""
        return self._native.positions(record_ids)


class BloomBatch:
    """Batch membership tests and inserts on one filter."""

    def __init__(self, size: FilterSize) -> None:
        self.capacity = size.capacity
        self.count = 0
        """Ids added."""
        self.bits = BloomBits(size.num_slices * size.bits_per_slice)

    def maybe_rows(self, positions: Positions) -> list[int]:
        """The rows whose bits are all set ("maybe seen"), in order."""
        return self.bits.maybe_rows(positions)

    def add(self, positions: Positions) -> None:
        """Set the bits of every row and count the rows as added."""
        self.bits.add(positions)
        self.count += len(positions)

    @property
    def room(self) -> int:
        """How many more ids fit before the filter exceeds its capacity."""
        return max(self.capacity - self.count, 0)
