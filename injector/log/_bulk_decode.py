"""Decoding and validating every entry of a buffer at once, with numpy.

The entries are framed by :mod:`injector.log._bulk_frame`; everything else -- types, lengths, record
offsets, COMMIT coverage, crcs -- is checked over all entries at once, the
same checks ``iter_requests`` makes one entry at a time.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from injector.log._bulk_frame import frame_fast
from injector.log._crc_check import bodies_match, bytewise
from injector.log._format import (
    COMMIT,
    COMMIT_HEAD,
    COMMIT_MIN_SIZE,
    I64,
    PREFIX_SIZE,
    RECORD,
    RECORD_HEAD,
    RECORD_HEAD_SIZE,
    U32,
)

Int64s = NDArray[np.int64]


def _field_positions(layout: struct.Struct) -> list[int]:
    """Where each field of a big-endian struct of one-letter codes starts."""
    positions, at = [], 0
    for code in layout.format.lstrip(">"):
        positions.append(at)
        at += struct.calcsize(">" + code)
    return positions


_, _OFFSET, _EVENT, _INGEST, _KEY_LEN = _field_positions(RECORD_HEAD)
_, _FIRST, _COUNT, _IKEY_LEN = _field_positions(COMMIT_HEAD)
_MAX_OFFSET = (1 << 63) - 1
"""Offsets above it do not fit an int64 column: such a file is read entry by entry."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """The whole, valid requests at the start of a buffer: their records as columns.

    ``used`` is where they end. ``bad`` is true if what follows them must be
    read entry by entry: it is not valid (or not checked).
    """

    used: int
    bad: bool
    offset: Int64s
    event_time_ms: Int64s
    ingest_time_ms: Int64s
    key_start: Int64s
    key_end: Int64s
    value_end: Int64s


def decode_requests(data: bytes, expected: int, *, at_end: bool) -> Decoded:
    """The valid requests that ``data`` starts with, its first record's offset being ``expected``.

    ``data`` starts at an entry; ``at_end``: it runs to the end of the file
    (then anything after the last valid request is bad, not a request to be
    continued by the next read).
    """
    starts, stop = frame_fast(data, expected)
    lengths = np.diff(starts, append=stop) - PREFIX_SIZE
    first_bad, kinds = _first_invalid(data, starts, lengths, expected)
    commits = np.flatnonzero(kinds[:first_bad] == COMMIT)
    count = int(commits[-1]) + 1 if len(commits) else 0  # entries up to the last valid COMMIT
    used = stop if count == len(starts) else int(starts[count])
    crcs_match = bodies_match(data, starts[:count], lengths[:count])
    if not crcs_match:
        count = used = 0
    if at_end:
        bad = used < len(data)
    else:
        bad = not crcs_match or first_bad < len(starts) or _zero_length_at(data, stop)
    records = kinds[:count] == RECORD
    starts, lengths = starts[:count][records], lengths[:count][records]
    return _records(data, starts, lengths, expected, used=used, bad=bad)


def _zero_length_at(data: bytes, at: int) -> bool:
    return at + PREFIX_SIZE <= len(data) and not U32.unpack_from(data, at)[0]


def _first_invalid(
    data: bytes, starts: Int64s, lengths: Int64s, expected: int
) -> tuple[int, NDArray[np.uint8]]:
    """The index of the first entry ``iter_requests`` would reject, crcs aside (len(starts)
    if none); and the type byte of every entry."""
    bodies = starts + PREFIX_SIZE
    kinds = np.frombuffer(data, np.uint8)[bodies]
    if not len(starts) or expected + len(starts) > _MAX_OFFSET:
        return 0, kinds
    records = kinds == RECORD
    before = np.cumsum(records) - records  # records before each entry
    bad = ~records
    bad[records] = ~_records_valid(data, bodies[records], lengths[records], expected)
    at = np.flatnonzero(kinds == COMMIT)
    bad[at] = ~_commits_valid(data, bodies[at], lengths[at], expected, before[at])
    return int(np.argmax(bad)) if bad.any() else len(starts), kinds


def _records_valid(
    data: bytes, bodies: Int64s, lengths: Int64s, expected: int
) -> NDArray[np.bool_]:
    """Which RECORD bodies hold their key and have offsets ``expected``, ``expected + 1``, ..."""
    key_lengths = _at(data, ">u4", bodies + _KEY_LEN)
    offsets = _at(data, ">u8", bodies + _OFFSET, np.uint64)
    wanted = np.arange(expected, expected + len(bodies), dtype=np.uint64)
    valid: NDArray[np.bool_] = (
        (lengths >= RECORD_HEAD_SIZE)
        & (RECORD_HEAD_SIZE + key_lengths <= lengths)
        & (offsets == wanted)
    )
    return valid


def _commits_valid(
    data: bytes, bodies: Int64s, lengths: Int64s, expected: int, records_before: Int64s
) -> NDArray[np.bool_]:
    """Which COMMIT bodies add up and cover exactly the records since the COMMIT before them."""
    key_ends = COMMIT_HEAD.size + _at(data, ">u2", bodies + _IKEY_LEN)
    source_lengths = _at(data, ">u4", bodies + key_ends)
    covered_from = np.concatenate(([0], records_before[:-1]))
    firsts = _at(data, ">u8", bodies + _FIRST, np.uint64)
    valid: NDArray[np.bool_] = (
        (lengths >= COMMIT_MIN_SIZE)
        & (key_ends + U32.size <= lengths)
        & (key_ends + U32.size + source_lengths + I64.size == lengths)
        & (firsts == np.uint64(expected) + covered_from.astype(np.uint64))
        & (_at(data, ">u4", bodies + _COUNT) == records_before - covered_from)
    )
    return valid


def _at(
    data: bytes, dtype: str, positions: Int64s, into: type[np.generic] = np.int64
) -> NDArray[Any]:
    """The ``dtype`` values at ``positions`` of ``data`` (clamped into it), as ``into``."""
    view = bytewise(data, dtype)
    return view[np.minimum(positions, len(view) - 1)].astype(into)


def _records(
    data: bytes, starts: Int64s, lengths: Int64s, expected: int, *, used: int, bad: bool
) -> Decoded:
    bodies = starts + PREFIX_SIZE
    key_start = bodies + RECORD_HEAD_SIZE
    return Decoded(
        used=used,
        bad=bad,
        offset=np.arange(expected, expected + len(starts), dtype=np.int64),
        event_time_ms=_at(data, ">i8", bodies + _EVENT),
        ingest_time_ms=_at(data, ">i8", bodies + _INGEST),
        key_start=key_start,
        key_end=key_start + _at(data, ">u4", bodies + _KEY_LEN),
        value_end=bodies + lengths,
    )
