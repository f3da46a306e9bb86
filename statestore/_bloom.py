"""pybloom-live filters probed and filled a whole batch of ids at a time.

The filters are ``pybloom_live.BloomFilter`` objects: their sizing (slices and
bits per slice for a capacity and error rate), their ``bitarray`` and their
count. The ids are hashed here, not by pybloom: pybloom runs a SHA-384 per key
in Python (~1.2 us an id, more than the rest of a record's dedup), while
:class:`BloomHasher` takes the 128-bit xxh3 of every id of a batch in one C-level
pass and derives each slice's bit from its two 64-bit halves (double hashing,
Kirsch and Mitzenmacher: ``h1 + i * h2``), with numpy testing and setting the
bits of every filter for the whole batch.

The filters live in memory only (rebuilt from the dedup column family on
open), so the hash is the process's own: xxh3 is seeded at random per store,
so ids chosen to collide in the filters cannot be computed in advance (a
collision only costs a RocksDB read: a "maybe" is always confirmed).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import partial

import numpy as np
import numpy.typing as npt
from pybloom_live import BloomFilter
from xxhash import xxh3_128_digest

Positions = npt.NDArray[np.int64]


def new_filter(capacity: int, error_rate: float) -> BloomFilter:
    """An empty pybloom-live filter."""
    return BloomFilter(capacity=capacity, error_rate=error_rate)


class BloomHasher:
    """Ids -> bit positions in filters sized as ``template`` (every filter of a store
    has the same capacity and error rate, so an id is hashed once for all of them)."""

    def __init__(self, template: BloomFilter, seed: int | None = None) -> None:
        """``seed``: of the xxh3 hash (random when None; hashers agree only on the same)."""
        self._num_slices: int = template.num_slices
        self._bits_per_slice = np.uint64(template.bits_per_slice)
        self._digest = partial(xxh3_128_digest, seed=secrets.randbits(64) if seed is None else seed)
        self._steps = np.arange(self._num_slices, dtype=np.uint64)[None, :]
        self._offsets = (np.arange(self._num_slices, dtype=np.int64) * template.bits_per_slice)[
            None, :
        ]

    def positions(self, record_ids: Sequence[bytes]) -> Positions:
        """Absolute bit positions, shape ``(len(record_ids), num_slices)``: slice ``i``'s
        bit is ``(h1 + i * h2) mod bits_per_slice`` (``h2`` odd, so the slices' bits of
        one id are distinct steps of one walk)."""
        if not record_ids:
            return np.empty((0, self._num_slices), dtype=np.int64)
        halves = np.frombuffer(b"".join(map(self._digest, record_ids)), dtype="<u8")
        halves = halves.reshape(len(record_ids), 2)
        first, step = halves[:, :1], halves[:, 1:] | np.uint64(1)
        bits = (first + self._steps * step) % self._bits_per_slice  # wraps mod 2**64: fine
        positions: Positions = bits.astype(np.int64) + self._offsets
        return positions


class BloomBatch:
    """Batch membership tests and inserts on one pybloom-live filter."""

    def __init__(self, bloom: BloomFilter) -> None:
        self.bloom = bloom
        self._bits = np.frombuffer(bloom.bitarray, dtype=np.uint8)

    def contains(self, positions: Positions) -> npt.NDArray[np.bool_]:
        """Per row: True when every bit is set ("maybe seen")."""
        flat = positions.ravel()
        bits = (self._bits[flat >> 3] >> (flat & 7).astype(np.uint8)) & 1
        result: npt.NDArray[np.bool_] = bits.reshape(positions.shape).all(axis=1)
        return result

    def add(self, positions: Positions) -> None:
        """Set the bits of every row and count the rows as added."""
        if positions.shape[0] == 0:
            return
        flat = positions.ravel()
        # ufunc.at applies every index, duplicates included (plain fancy-index
        # assignment would keep only one write per duplicate byte). numpy >= 2
        # made it faster than one masked pass per bit value, at every batch size.
        np.bitwise_or.at(self._bits, flat >> 3, np.left_shift(1, flat & 7).astype(np.uint8))
        self.bloom.count += positions.shape[0]

    @property
    def room(self) -> int:
        """How many more ids fit before the filter exceeds its capacity."""
        room: int = self.bloom.capacity - self.bloom.count
        return max(room, 0)
