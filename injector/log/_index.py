"""The sidecar index of a sealed segment: ``segment-<base>.idx`` (``docs/log-format.md``).

Written once, when its segment is sealed, through a temporary file, fsync
and rename, so a reader sees either no index or a complete one. It holds a
sparse offset -> file position map and the segment's summary, so opening a
log never scans a sealed segment and a reader seeks straight to an offset.
A missing or damaged index is rebuilt by scanning its segment.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from millrace.injector.log._fileio import write_all

INDEX_MAGIC = b"MRIDX\x01\n\x00"
INDEX_HEADER = struct.Struct(">8sQ")
"""Magic, base offset."""
INDEX_ENTRY = struct.Struct(">QQ")
"""Offset, file position of that record's entry."""
INDEX_FOOTER = struct.Struct(">IIQQQQqqqqq")
"""Entry count, index_every, end offset, records, commits, segment bytes,
min/max event ms, min/max ingest ms, created ms; a u32 crc follows."""
CRC = struct.Struct(">I")
TMP_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """Everything an index file stores about its segment.

    Time fields are meaningful only when ``records`` (event times) or
    ``commits`` (ingest times, ``created_ms``) is non-zero.
    """

    base_offset: int
    end_offset: int
    records: int
    commits: int
    size_bytes: int
    min_event_ms: int
    max_event_ms: int
    min_ingest_ms: int
    max_ingest_ms: int
    created_ms: int
    index_every: int
    index: tuple[tuple[int, int], ...]


class IndexInvalidError(Exception):
    """The index file is missing, torn or does not match its segment; rebuild it."""


def encode_index(summary: SegmentSummary) -> bytes:
    """The bytes of the index file of ``summary``."""
    entry = INDEX_ENTRY.pack
    body = b"".join(
        (
            INDEX_HEADER.pack(INDEX_MAGIC, summary.base_offset),
            *(entry(offset, position) for offset, position in summary.index),
            INDEX_FOOTER.pack(
                len(summary.index),
                summary.index_every,
                summary.end_offset,
                summary.records,
                summary.commits,
                summary.size_bytes,
                summary.min_event_ms,
                summary.max_event_ms,
                summary.min_ingest_ms,
                summary.max_ingest_ms,
                summary.created_ms,
            ),
        )
    )
    return body + CRC.pack(zlib.crc32(body))


def decode_index(data: bytes) -> SegmentSummary:
    """The summary in an index file; raises :class:`IndexInvalidError` unless it checks out."""
    fixed = INDEX_HEADER.size + INDEX_FOOTER.size + CRC.size
    if len(data) < fixed:
        raise IndexInvalidError(f"{len(data)} bytes, at least {fixed} expected")
    (crc,) = CRC.unpack_from(data, len(data) - CRC.size)
    if zlib.crc32(data[: -CRC.size]) != crc:
        raise IndexInvalidError("crc mismatch")
    magic, base = INDEX_HEADER.unpack_from(data)
    if magic != INDEX_MAGIC:
        raise IndexInvalidError(f"bad magic {magic!r}")
    footer = INDEX_FOOTER.unpack_from(data, len(data) - CRC.size - INDEX_FOOTER.size)
    count = footer[0]
    if fixed + count * INDEX_ENTRY.size != len(data):
        raise IndexInvalidError(f"{count} entries do not fit {len(data)} bytes")
    entries = data[INDEX_HEADER.size : INDEX_HEADER.size + count * INDEX_ENTRY.size]
    index = tuple((int(o), int(p)) for o, p in INDEX_ENTRY.iter_unpack(entries))
    return SegmentSummary(
        base_offset=base,
        index_every=footer[1],
        end_offset=footer[2],
        records=footer[3],
        commits=footer[4],
        size_bytes=footer[5],
        min_event_ms=footer[6],
        max_event_ms=footer[7],
        min_ingest_ms=footer[8],
        max_ingest_ms=footer[9],
        created_ms=footer[10],
        index=index,
    )


def read_index(path: Path) -> SegmentSummary:
    """Read and check one index file; raises :class:`IndexInvalidError` when absent or bad."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise IndexInvalidError("missing") from exc
    return decode_index(data)


def write_index(path: Path, summary: SegmentSummary, *, fsync: bool) -> None:
    """Write ``path`` atomically: a temporary file, fsync, rename.

    The caller fsyncs the directory (the rename's durability) when it needs it.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, encode_index(summary))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
