"""Reading one segment file in bulk: its committed records as numpy columns.

:func:`scan_segment_columns` gives what :func:`~injector.log.scan_segment`
gives -- the committed records in offset order, then, at the first entry that
breaks the rules of ``docs/log-format.md``, the :class:`CorruptEntry` it stops
at -- without a Python object per record. It reads the file a few MiB at a
time and checks and decodes all the entries of a read in one native call
(:func:`millrace.dataplane.scan_columns`, the scanner ``scan_segment`` and
recovery run too), so a corrupt entry is reported exactly as ``scan_segment``
reports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.typing import NDArray

from millrace.dataplane import scan_columns
from millrace.injector.log._fileio import sized_source
from millrace.injector.log._format import (
    HEADER_SIZE,
    PREFIX_SIZE,
    RECORD_HEAD_SIZE,
    EntryError,
    decode_header,
)
from millrace.injector.log._types import CorruptEntry

READ_BYTES = 8 << 20
"""Bytes read (and decoded) at a time; a longer request is read whole."""


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """Committed records of a segment, in offset order, as columns.

    Keys and values stay in ``data`` (a stretch of the segment file, or the
    bodies of the records): record ``i``'s key is
    ``data[key_start[i]:key_end[i]]`` and its value
    ``data[key_end[i]:value_end[i]]``. Every array is int64. ``position``: the
    file position of ``data[0]`` when ``data`` is a stretch of the file.
    """

    data: bytes
    offset: NDArray[np.int64]
    event_time_ms: NDArray[np.int64]
    ingest_time_ms: NDArray[np.int64]
    key_start: NDArray[np.int64]
    key_end: NDArray[np.int64]
    value_end: NDArray[np.int64]
    position: int = 0

    def __len__(self) -> int:
        return len(self.offset)

    def entry_positions(self) -> NDArray[np.int64]:
        """The file position of each record's entry (where its 8-byte prefix starts),
        for columns read from a segment file."""
        return self.key_start + (self.position - PREFIX_SIZE - RECORD_HEAD_SIZE)


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
        columns, used, expected, bad = scan_columns(
            data, position=position, expected=expected, complete=at_end
        )
        if columns is not None:
            offset, event, ingest, key_start, key_end, value_end = (
                np.frombuffer(column, np.int64) for column in columns
            )
            yield RecordColumns(
                data, offset, event, ingest, key_start, key_end, value_end, position=position
            )
        if bad is not None:
            yield CorruptEntry(position=bad[0], reason=bad[1])
            return
        if at_end:
            return
        # A request longer than a read is read whole: double the read until it fits.
        want = read_bytes if used else 2 * len(data)
        data = data[used:]
        position += used
