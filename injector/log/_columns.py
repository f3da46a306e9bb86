"""Reading one segment file in bulk: its committed records as numpy columns.

:func:`scan_segment_columns` gives what :func:`~injector.log.scan_segment`
gives -- the committed records in offset order, then, at the first entry that
breaks the rules of ``docs/log-format.md``, the :class:`CorruptEntry` it stops
at -- without a Python object per record. It reads the file a few MiB at a
time and frames, decodes and validates all the entries of a read at once
with numpy (:mod:`injector.log._bulk_decode`). From the last good COMMIT
before a read's first bad entry on, the file is scanned entry by entry
(``iter_requests``, what ``scan_segment`` runs), so a corrupt entry is
reported exactly as ``scan_segment`` reports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.typing import NDArray

from injector.log._bulk_decode import Decoded, decode_requests
from injector.log._fileio import sized_source
from injector.log._format import (
    HEADER_SIZE,
    RECORD_HEAD_SIZE,
    EntryError,
    Pending,
    decode_header,
    iter_requests,
)
from injector.log._types import CorruptEntry

READ_BYTES = 8 << 20
"""Bytes read (and decoded) at a time; a longer request is read whole."""
_BY_ENTRY_ROWS = 10_000
"""Records scanned entry by entry are given this many at a time."""


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """Committed records of a segment, in offset order, as columns.

    Keys and values stay in ``data`` (a stretch of the segment file, or the
    bodies of the records): record ``i``'s key is
    ``data[key_start[i]:key_end[i]]`` and its value
    ``data[key_end[i]:value_end[i]]``. Every array is int64.
    """

    data: bytes
    offset: NDArray[np.int64]
    event_time_ms: NDArray[np.int64]
    ingest_time_ms: NDArray[np.int64]
    key_start: NDArray[np.int64]
    key_end: NDArray[np.int64]
    value_end: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.offset)


def scan_segment_columns(
    source: str | Path | BinaryIO, *, read_bytes: int = READ_BYTES
) -> Iterator[RecordColumns | CorruptEntry]:
    """Every committed record of one segment file, in offset order, some thousands at a time.

    The same records, and the same :class:`CorruptEntry` at the end of a
    damaged file, as :func:`~injector.log.scan_segment` (which see for
    ``source``), as :class:`RecordColumns` of the whole requests of each
    ``read_bytes`` read. Record ids are not included: they are the stream's
    :func:`~injector.log.stream_tag` and the big-endian offset.
    """
    with sized_source(source) as (f, size):
        yield from _scan(f, size, read_bytes)


def _scan(f: BinaryIO, size: int, read_bytes: int) -> Iterator[RecordColumns | CorruptEntry]:
    try:
        expected = decode_header(f.read(HEADER_SIZE))
    except EntryError as error:
        yield CorruptEntry(position=error.position, reason=error.reason)
        return
    position = HEADER_SIZE  # file position of data[0], where a request starts
    data = b""
    want = read_bytes
    while True:
        asked = min(want, size - position) - len(data)
        more = f.read(asked) if asked > 0 else b""
        data += more
        at_end = position + len(data) >= size or len(more) < asked
        done = decode_requests(data, expected, at_end=at_end)
        if len(done.offset):
            yield _columns(data, done)
        if done.bad:
            yield from _entry_by_entry(f, position + done.used, size, expected + len(done.offset))
            return
        if at_end:
            return
        # A request longer than a read is read whole: double the read until it fits.
        want = read_bytes if done.used else 2 * len(data)
        data = data[done.used :]
        position += done.used
        expected += len(done.offset)


def _columns(data: bytes, done: Decoded) -> RecordColumns:
    return RecordColumns(
        data,
        done.offset,
        done.event_time_ms,
        done.ingest_time_ms,
        done.key_start,
        done.key_end,
        done.value_end,
    )


def _entry_by_entry(
    f: BinaryIO, position: int, size: int, expected: int
) -> Iterator[RecordColumns | CorruptEntry]:
    """The rest of the file from a request's start, as ``scan_segment`` reads it."""
    pending: list[Pending] = []
    try:
        for records, _commit, _end in iter_requests(f, expected, position, size):
            pending += records
            if len(pending) >= _BY_ENTRY_ROWS:
                yield _pending_columns(pending)
                pending = []
    except EntryError as error:
        if pending:
            yield _pending_columns(pending)
        yield CorruptEntry(position=error.position, reason=error.reason)
        return
    if pending:
        yield _pending_columns(pending)


def _pending_columns(pending: list[Pending]) -> RecordColumns:
    _, bodies, offsets, events, ingests, key_lengths = zip(*pending, strict=True)
    ends = np.cumsum([len(body) for body in bodies], dtype=np.int64)
    starts = ends - np.array([len(body) for body in bodies], np.int64)
    key_start = starts + RECORD_HEAD_SIZE
    return RecordColumns(
        b"".join(bodies),
        np.array(offsets, np.int64),
        np.array(events, np.int64),
        np.array(ingests, np.int64),
        key_start,
        key_start + np.array(key_lengths, np.int64),
        ends,
    )
