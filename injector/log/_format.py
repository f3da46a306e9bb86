"""Byte layout of segment files: names, header, entries, record ids (``docs/log-format.md``).

Everything here is pure: encoders build bytes, decoders take bytes or a
binary file and raise :class:`EntryError` at the first entry that fails
validation. The segment, recovery and scan modules build on these.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import BinaryIO

import xxhash

from millrace.dataplane import RecordBatch, encode_log_request, scan_requests
from millrace.dataplane import decode_commit as native_decode_commit
from millrace.injector.log._fileio import Stretches
from millrace.injector.log._types import Commit, LogRecord

MAGIC = b"MRLOG\x01\n\x00"
HEADER = struct.Struct(">8sQ")
"""File header: magic, base offset."""
HEADER_SIZE = HEADER.size
ENTRY_PREFIX = struct.Struct(">II")
"""Entry prefix: body length, zlib.crc32 of the body."""
PREFIX_SIZE = ENTRY_PREFIX.size
RECORD_HEAD = struct.Struct(">BQqqI")
"""RECORD body head: type, offset, event time, ingest time, key length; key and value follow."""
RECORD_HEAD_SIZE = RECORD_HEAD.size
U64 = struct.Struct(">Q")

RECORD = 1
COMMIT = 2

_SEGMENT_NAME = re.compile(r"segment-(\d{20})\.(log|idx)")


class EntryError(Exception):
    """An entry at ``position`` failed validation (``reason`` says how)."""

    def __init__(self, position: int, reason: str, *, complete: bool = True) -> None:
        super().__init__(f"byte {position}: {reason}")
        self.position = position
        self.reason = reason
        self.complete = complete
        """False when the problem is not an entry at all (records lacking a COMMIT at the end)."""
        self.uncommitted = 0
        """Complete entries after the last valid COMMIT and before ``position``."""


# ---------------------------------------------------------------------------
# Names and ids
# ---------------------------------------------------------------------------


def segment_name(base_offset: int) -> str:
    """``segment-<base_offset:020d>.log``."""
    return f"segment-{base_offset:020d}.log"


def index_name(base_offset: int) -> str:
    """``segment-<base_offset:020d>.idx``: the sidecar index of a sealed segment."""
    return f"segment-{base_offset:020d}.idx"


def parse_name(name: str) -> tuple[int, str] | None:
    """``(base_offset, "log" | "idx")`` for a segment or index file name, else None."""
    match = _SEGMENT_NAME.fullmatch(name)
    return (int(match.group(1)), match.group(2)) if match else None


def stream_tag(stream: str) -> bytes:
    """The first 8 bytes of every record id of ``stream``: xxh3-64 of its UTF-8 name.

    Tells which stream a record id belongs to without decoding anything else.
    """
    return xxhash.xxh3_64_digest(stream.encode())


def record_id(stream: str, offset: int) -> bytes:
    """The 16-byte id of record ``offset`` of ``stream``: xxh3-64(stream) + u64 offset."""
    return stream_tag(stream) + U64.pack(offset)


def offset_of(rid: bytes) -> int:
    """The offset a record id names (its last 8 bytes, big-endian)."""
    if len(rid) != 16:
        raise ValueError(f"a record id has 16 bytes, got {len(rid)}")
    return int.from_bytes(rid[8:], "big")


# ---------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------


def encode_header(base_offset: int) -> bytes:
    """The 16-byte file header of a segment starting at ``base_offset``."""
    return HEADER.pack(MAGIC, base_offset)


def decode_header(data: bytes) -> int:
    """The base offset of a segment header; raises :class:`EntryError` if it is not one."""
    if len(data) < HEADER_SIZE:
        raise EntryError(0, f"torn segment header ({len(data)} of {HEADER_SIZE} bytes)")
    magic, base = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise EntryError(0, f"bad segment magic {magic!r}")
    return int(base)


def header_is_torn(data: bytes) -> bool:
    """True if ``data`` can only be a header whose write never completed.

    A prefix of the magic, or zeros (a file extended but not written before a
    power loss); anything else is a foreign or damaged file.
    """
    if len(data) >= HEADER_SIZE:
        return data[:HEADER_SIZE] == bytes(HEADER_SIZE)
    return MAGIC.startswith(data[: len(MAGIC)]) or data == bytes(len(data))


def encode_request(
    parts: list[bytes],
    records: RecordBatch,
    idempotency_key: bytes,
    source: bytes,
    *,
    offset: int,
    ingest_ms: int,
    position: int,
    next_index: int,
    index_every: int,
    index: list[tuple[int, int]],
) -> tuple[int, int, int, int]:
    """Append the entries of one request -- its RECORDs, then its COMMIT -- to ``parts``.

    Records get offsets from ``offset``; all carry ``ingest_ms``, which is
    also the commit time. ``position`` is the file position of the first
    entry; every record whose offset is ``next_index`` (then every
    ``index_every`` offsets) gets an ``(offset, position)`` entry in
    ``index``. Returns ``(position after the COMMIT, next index offset,
    min event time, max event time)``; the times are 0 without records.
    Encoded natively in one call (:func:`millrace.dataplane.encode_log_request`);
    raises ValueError for a request the format cannot hold, leaving ``parts`` and
    ``index`` as they were.
    """
    entries, indexed, position, next_index, low, high = encode_log_request(
        records,
        idempotency_key,
        source,
        offset=offset,
        ingest_ms=ingest_ms,
        position=position,
        next_index=next_index,
        index_every=index_every,
    )
    parts.append(entries)
    index += indexed
    return position, next_index, low, high


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def decode_commit(body: bytes, position: int) -> Commit:
    """The commit in a COMMIT body; raises :class:`EntryError` if its lengths do not add up."""
    try:
        first, count, key, source, committed_at = native_decode_commit(body)
    except ValueError as exc:
        raise EntryError(position, str(exc)) from None
    return Commit(first, count, key, source, committed_at)


Pending = tuple[int, bytes, int, int, int, int]
"""A record entry of a request: position, body, offset, event ms, ingest ms, key length."""

READ_BYTES = 1 << 20
"""Bytes of a segment scanned at a time (a longer request is read whole)."""


def iter_requests(
    f: BinaryIO, base_offset: int, start: int, end: int, *, keep_records: bool = True
) -> Iterator[tuple[list[Pending], Commit, int]]:
    """Whole requests in ``[start, end)``: ``(records, commit, position after the commit)``.

    Checked natively (:func:`millrace.dataplane.scan_requests`) a stretch at a time:
    each entry's length and crc, record offsets dense from ``base_offset``, every
    COMMIT covering exactly the records since the previous one, no records trailing
    the last COMMIT. ``keep_records=False`` yields empty record lists (cheaper, for
    callers that only want commits). Raises :class:`EntryError` (``complete`` False
    for records without their COMMIT at the end) with ``uncommitted`` set to the
    complete entries after the last valid COMMIT.
    """
    stretches = Stretches(f, start, end, READ_BYTES)
    expected = base_offset
    while True:
        data, complete = stretches.read()
        requests, consumed, expected, error = scan_requests(
            data,
            position=stretches.position,
            expected=expected,
            complete=complete,
            keep_records=keep_records,
        )
        for records, (first, count, key, source, at_ms), request_end in requests:
            yield records, Commit(first, count, key, source, at_ms), request_end
        if error is not None:
            at, reason, whole, uncommitted = error
            problem = EntryError(at, reason, complete=whole)
            problem.uncommitted = uncommitted
            raise problem
        if complete:
            return
        stretches.consume(consumed)


_new_tuple = tuple.__new__


def log_record(  # noqa: PLR0917 - called per record read: positional arguments are cheaper
    body: bytes, offset: int, record_id: bytes, event_ms: int, ingest_ms: int, key_len: int
) -> LogRecord:
    """The :class:`LogRecord` of a RECORD entry's ``body`` whose head says ``offset``,
    ``event_ms``, ``ingest_ms`` and ``key_len`` (the named tuple is built in C: its own
    ``__new__`` is Python, ~0.3 us, and reads make one per record)."""
    key_end = RECORD_HEAD_SIZE + key_len
    key, value = body[RECORD_HEAD_SIZE:key_end], body[key_end:]
    return _new_tuple(LogRecord, (offset, record_id, key, value, event_ms, ingest_ms))
