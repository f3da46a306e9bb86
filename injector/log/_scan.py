"""Reading one segment file on its own: what a Spark task runs per sealed segment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from millrace.injector.log._fileio import sized_source
from millrace.injector.log._format import (
    HEADER_SIZE,
    U64,
    EntryError,
    decode_header,
    iter_requests,
    log_record,
    stream_tag,
)
from millrace.injector.log._types import CorruptEntry, LogRecord


def scan_segment(source: str | Path | BinaryIO, stream: str) -> Iterator[LogRecord | CorruptEntry]:
    """Every committed record of one segment file, in offset order.

    Needs only the file and the name of the stream it belongs to (record ids
    start with a hash of it). ``source`` is the file's path, or a binary
    file object open on it that can ``seek`` (a ``pyarrow.fs`` file, an
    ``io.BytesIO`` of its bytes): read from its start to its end and left
    open. COMMIT entries are checked and skipped; a request's
    records are yielded once its COMMIT has been read, so a request is seen
    whole or not at all. At the first entry that fails validation (bad
    header, torn entry, bad crc, offsets out of sequence, records without
    their COMMIT at the end) it yields one :class:`CorruptEntry` and stops.
    Meant for sealed segments: on the active segment of a running writer, an
    append in flight looks like a torn tail.
    """
    with sized_source(source) as (f, size):
        yield from _scan(f, size, stream)


def _scan(f: BinaryIO, size: int, stream: str) -> Iterator[LogRecord | CorruptEntry]:
    prefix = stream_tag(stream)
    pack_offset = U64.pack
    try:
        base = decode_header(f.read(HEADER_SIZE))
    except EntryError as error:
        yield CorruptEntry(position=error.position, reason=error.reason)
        return
    try:
        for records, _commit, _end in iter_requests(f, base, HEADER_SIZE, size):
            for _position, body, offset, event_ms, ingest_ms, key_len in records:
                record_id = prefix + pack_offset(offset)
                yield log_record(body, offset, record_id, event_ms, ingest_ms, key_len)
    except EntryError as error:
        yield CorruptEntry(position=error.position, reason=error.reason)
