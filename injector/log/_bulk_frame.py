"""Finding where the entries of a buffer start: its framing.

Each entry's position follows from the length of the one before it, so the
plain way is a loop over the entries (:func:`frame`). :func:`frame_fast`
finds the same positions with a few numpy passes where the buffer holds
requests of several records: a RECORD entry is wherever a RECORD type byte
is followed by one of the offsets the records can have, and only the entries
between records (the COMMITs) are framed one by one. The chain of positions
found is then checked whole -- each entry ends where the next one starts --
so a false find (the bytes of a key or value looking like a record) only
costs the plain loop, never a wrong framing.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
from numpy.typing import NDArray

from injector.log._crc_check import bytewise
from injector.log._format import PREFIX_SIZE, RECORD, RECORD_HEAD, RECORD_HEAD_SIZE, U32

Int64s = NDArray[np.int64]

_OFFSET = struct.calcsize(RECORD_HEAD.format[:2])
"""Where a RECORD body's offset field starts: after its type byte."""


def frame(data: bytes, start: int = 0) -> tuple[Int64s, int]:
    """Where the entries lying wholly in ``data`` from ``start`` on start, and where they stop.

    Stops at the end of ``data``, at an entry that goes past it, or at an
    entry of length 0.
    """
    starts = array("q")
    add = starts.append
    unpack = U32.unpack_from
    size = len(data)
    at, last = start, size - PREFIX_SIZE
    while at <= last:
        (length,) = unpack(data, at)
        end = at + PREFIX_SIZE + length
        if end > size or not length:
            break
        add(at)
        at = end
    return np.frombuffer(starts, np.int64), at


def frame_fast(data: bytes, expected: int) -> tuple[Int64s, int]:
    """What :func:`frame` gives for ``data``, whose first record (if any) is ``expected``."""
    records = _record_starts(data, expected)
    if not len(records):
        return frame(data)
    ends = records + PREFIX_SIZE + bytewise(data, ">u4")[records]
    walked = _frame_gaps(data, records, np.concatenate(([0], ends[:-1])))
    if walked is None:
        return frame(data)
    tail, stop = frame(data, int(ends[-1]))
    before, starts = walked
    return np.concatenate((np.insert(records, before, starts), tail)), stop


def _record_starts(data: bytes, expected: int) -> Int64s:
    """Where RECORD entries of offsets from ``expected`` may start: non-empty, within ``data``."""
    size = len(data)
    if size < PREFIX_SIZE + RECORD_HEAD_SIZE:
        return np.empty(0, np.int64)
    kinds = np.frombuffer(data, np.uint8)[PREFIX_SIZE : size - RECORD_HEAD_SIZE + 1]
    bodies = np.flatnonzero(kinds == RECORD) + PREFIX_SIZE
    most = np.uint64(size // (PREFIX_SIZE + RECORD_HEAD_SIZE))
    offsets = bytewise(data, ">u8")[bodies + _OFFSET]
    starts = bodies[offsets - np.uint64(expected) < most] - PREFIX_SIZE  # wraps below expected
    lengths = bytewise(data, ">u4")[starts]
    result: Int64s = starts[(lengths > 0) & (starts + PREFIX_SIZE + lengths <= size)]
    return result


def _frame_gaps(
    data: bytes, records: Int64s, previous_ends: Int64s
) -> tuple[list[int], list[int]] | None:
    """The entries between each record and the entry before it (the first: the buffer's start).

    As (index of the record they precede, start) pairs in order; None if the
    entries from a record's predecessor do not end exactly where it starts.
    """
    before: list[int] = []
    starts: list[int] = []
    unpack = U32.unpack_from
    for i in np.flatnonzero(previous_ends != records).tolist():
        at, target = int(previous_ends[i]), int(records[i])
        while at < target:
            (length,) = unpack(data, at)
            if not length:
                return None
            before.append(i)
            starts.append(at)
            at += PREFIX_SIZE + length
        if at != target:
            return None
    return before, starts
