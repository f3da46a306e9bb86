"""Checking the crc of every entry of a buffer with two ``zlib.crc32`` calls, not one per entry.

A ``zlib.crc32`` call per entry costs more than everything else a bulk scan
does per record, so :func:`bodies_match` checks them all at once. It builds
a stand-in buffer: the same entry prefixes, and in place of each body a body
of zeros ending in four bytes chosen so that its crc is the *stored* one.
CRC-32 is linear, so the crc of the real buffer equals the stand-in's when
every body's crc equals its stored crc; one body that does not changes the
whole buffer's crc for sure (its difference is multiplied by a power of x,
which is invertible modulo the polynomial). Several bad bodies could cancel
out with a chance of 2**-32, the same chance a random error has to slip past
one entry's own crc.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

from injector.log._format import PREFIX_SIZE

_MASK = 0xFFFFFFFF


def _advance(register: int) -> int:
    """zlib's crc register after four zero bytes (the register is the complement of the crc)."""
    return ~zlib.crc32(bytes(4), ~register & _MASK) & _MASK


def _inverse_tables() -> NDArray[np.uint32]:
    """Four 256-entry tables: XOR-ing ``table[k][byte k of y]`` inverts :func:`_advance` at y."""
    pairs = [(_advance(1 << bit), 1 << bit) for bit in range(32)]  # (image, preimage)
    for bit in range(32):  # Gauss-Jordan elimination over GF(2)
        pivot = next(i for i in range(bit, 32) if pairs[i][0] >> bit & 1)
        pairs[bit], pairs[pivot] = pairs[pivot], pairs[bit]
        image, preimage = pairs[bit]
        for i in range(32):
            if i != bit and pairs[i][0] >> bit & 1:
                pairs[i] = (pairs[i][0] ^ image, pairs[i][1] ^ preimage)
    values = np.arange(256)
    tables = np.zeros((4, 256), np.uint32)
    for bit, (_, preimage) in enumerate(pairs):
        tables[bit // 8][(values >> (bit % 8)) & 1 == 1] ^= np.uint32(preimage)
    return tables


_INVERSE = _inverse_tables()


def _unadvance(values: NDArray[np.uint32]) -> NDArray[np.uint32]:
    t = _INVERSE
    result: NDArray[np.uint32] = (
        t[0][values & 0xFF]
        ^ t[1][(values >> 8) & 0xFF]
        ^ t[2][(values >> 16) & 0xFF]
        ^ t[3][values >> 24]
    )
    return result


def _zeros_crcs(lengths: NDArray[np.int64]) -> NDArray[np.uint32]:
    """``zlib.crc32(bytes(n))`` for every n of ``lengths``; one pass over the longest."""
    longest = int(lengths.max())
    if longest < _LOOKUP_LIMIT:  # a table by length is cheaper than sorting
        seen = np.zeros(longest + 1, np.bool_)
        seen[lengths] = True
        unique = np.flatnonzero(seen)
    else:
        unique, where = np.unique(lengths, return_inverse=True)
    crcs = np.empty(len(unique), np.uint32)
    crc = done = 0
    for i, n in enumerate(unique.tolist()):
        crc = zlib.crc32(bytes(n - done), crc)
        crcs[i] = crc
        done = n
    if longest >= _LOOKUP_LIMIT:
        return crcs[where]
    table = np.empty(longest + 1, np.uint32)
    table[unique] = crcs
    return table[lengths]


_LOOKUP_LIMIT = 1 << 16


def bytewise(data: bytes | NDArray[np.uint8], dtype: str) -> NDArray[Any]:
    """``data`` as overlapping ``dtype`` items, one starting at every byte (index = position)."""
    width = np.dtype(dtype).itemsize
    count = max(len(data) - width + 1, 0)
    return np.ndarray(shape=(count,), dtype=dtype, buffer=data, strides=(1,))


def bodies_match(data: bytes, starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> bool:
    """Whether every entry's body has the crc stored in its prefix.

    The entries start at ``starts`` (the first at 0), lie back to back and
    have bodies of ``lengths`` bytes, at least 4 each.
    """
    if not len(starts):
        return True
    end = int(starts[-1] + PREFIX_SIZE + lengths[-1])
    prefixes = bytewise(data, ">u8")[starts]  # length << 32 | crc
    crcs = (prefixes & _MASK).astype(np.uint32)
    stand_in = np.zeros(end, np.uint8)
    bytewise(stand_in, ">u8")[starts] = prefixes
    # The register after a body of n - 4 zeros is ~crc(zeros); four bytes q then leave
    # advance(register ^ q); for the crc to be c that must be ~c.
    tails = _unadvance(~crcs) ^ ~_zeros_crcs(lengths - 4)
    bytewise(stand_in, "<u4")[starts + PREFIX_SIZE + lengths - 4] = tails
    return zlib.crc32(memoryview(data)[:end]) == zlib.crc32(stand_in.data)
