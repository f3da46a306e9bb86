"""pybloom-live filters probed and filled a whole batch of ids at a time.

pybloom-live hashes one key at a time and tests bits one by one, about 10 us
per id per filter. Here every filter of a store has the same capacity and
error rate, so they share pybloom's hash functions: each id is hashed once,
exactly as pybloom hashes it, and numpy then tests and sets the bits of every
filter's ``bitarray`` for the whole batch. The filters stay genuine
``pybloom_live.BloomFilter`` objects: ``key in filter`` agrees with
:meth:`BloomBatch.contains` (a test pins this).

The pybloom key of a record id is ``record_id.hex()``.
"""

from __future__ import annotations

import struct
from binascii import hexlify
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pybloom_live import BloomFilter

Positions = npt.NDArray[np.int64]

_DTYPES: dict[str, np.dtype[np.unsignedinteger[Any]]] = {
    "Q": np.dtype("=u8"),
    "I": np.dtype("=u4"),
    "H": np.dtype("=u2"),
}


def new_filter(capacity: int, error_rate: float) -> BloomFilter:
    """An empty pybloom-live filter."""
    return BloomFilter(capacity=capacity, error_rate=error_rate)


def pybloom_key(record_id: bytes) -> str:
    """The key under which a record id is stored in pybloom's terms."""
    return record_id.hex()


class BloomHasher:
    """pybloom-live's ``make_hashfuncs`` for a batch: ids -> bit positions.

    The salts, digest function and digest slicing reproduce pybloom-live
    4.x exactly, derived from a template filter's parameters.
    """

    def __init__(self, template: BloomFilter) -> None:
        num_slices: int = template.num_slices
        bits_per_slice: int = template.bits_per_slice
        if bits_per_slice >= 1 << 31:
            code, chunk = "Q", 8
        elif bits_per_slice >= 1 << 15:
            code, chunk = "I", 4
        else:
            code, chunk = "H", 2
        hashfn = template.hashfn
        per_digest = hashfn().digest_size // chunk
        num_salts = -(-num_slices // per_digest)
        self._salts = tuple(hashfn(hashfn(struct.pack("I", i)).digest()) for i in range(num_salts))
        self._dtype = _DTYPES[code]
        self._num_slices = num_slices
        self._bits_per_slice = bits_per_slice
        self._offsets = (np.arange(num_slices, dtype=np.int64) * bits_per_slice)[None, :]

    def positions(self, record_ids: Sequence[bytes]) -> Positions:
        """Absolute bit positions, shape ``(len(record_ids), num_slices)``."""
        if not record_ids:
            return np.empty((0, self._num_slices), dtype=np.int64)
        digests: list[bytes] = []
        append = digests.append
        if len(self._salts) == 1:
            salt = self._salts[0]
            for record_id in record_ids:
                h = salt.copy()
                h.update(hexlify(record_id))
                append(h.digest())
        else:
            for record_id in record_ids:
                encoded = hexlify(record_id)
                for salt in self._salts:
                    h = salt.copy()
                    h.update(encoded)
                    append(h.digest())
        words = np.frombuffer(b"".join(digests), dtype=self._dtype)
        words = words.reshape(len(record_ids), -1)[:, : self._num_slices]
        positions: Positions = (words.astype(np.int64) % self._bits_per_slice) + self._offsets
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
