"""Logs the data source tests read, their archives, and what reading them must give."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from millrace.injector.archive import ArchiveLocation, LogArchiver
from millrace.injector.log import (
    AppendRequest,
    CorruptEntry,
    LogConfig,
    LogRecord,
    SegmentInfo,
    StreamLog,
    scan_segment,
)

T0 = 1_700_000_000_000
STREAMS = ("clicks", "views")

Row = tuple[bytes, bytes, bytes, int, int, str, int]
"""record_id, key, value, event_time_ms, ingest_time_ms, stream, offset."""


def write_stream(log_dir: Path, stream: str, requests: int, *, segment_bytes: int = 4096) -> None:
    """A closed log of ``requests`` requests of 1..7 records; event times grow with the request
    number (+-300 ms of jitter), so segments cover distinct event-time ranges."""
    rng = random.Random(stream)
    log = StreamLog.open(log_dir / stream, stream, config=LogConfig(segment_bytes=segment_bytes))
    for number in range(requests):
        records = [
            (
                f"k{rng.randrange(20)}".encode(),
                f"{stream}-{number}-{i}".encode() * rng.randint(1, 4),
                T0 + number * 1000 + rng.randrange(-300, 300),
            )
            for i in range(rng.randint(1, 7))
        ]
        log.append([AppendRequest(records=records, idempotency_key=f"r{number}".encode())])
    log.close()


def write_logs(log_dir: Path, *, segment_bytes: int = 4096) -> None:
    """Two streams of several sealed segments each, and an active segment with records."""
    write_stream(log_dir, "clicks", 150, segment_bytes=segment_bytes)
    write_stream(log_dir, "views", 90, segment_bytes=segment_bytes * 3 // 4)


def segments(log_dir: Path, stream: str) -> list[SegmentInfo]:
    """The stream's segments, as the log describes them."""
    log = StreamLog.open(log_dir / stream, stream, read_only=True)
    try:
        return log.segments()
    finally:
        log.close()


def oracle(log_dir: Path, stream: str, *, include_active: bool = False) -> list[Row]:
    """What reading the stream must give: ``StreamLog.read`` of its (sealed) segments."""
    log = StreamLog.open(log_dir / stream, stream, read_only=True)
    try:
        infos = [s for s in log.segments() if s.sealed or include_active]
        records = log.read(0, 10**9)
    finally:
        log.close()
    held = [r for r in records if any(s.base_offset <= r.offset < s.end_offset for s in infos)]
    return [as_row(stream, r) for r in held]


def as_row(stream: str, record: LogRecord) -> Row:
    return (
        record.record_id,
        record.key,
        record.value,
        record.event_time_ms,
        record.ingest_time_ms,
        stream,
        record.offset,
    )


def archive(log_dir: Path, archive_dir: Path, streams: tuple[str, ...] = STREAMS) -> str:
    """Archive every sealed segment to ``archive_dir`` with the injector's own archiver
    (``.log``, ``.idx``, then the manifest entry); its URI."""
    uri = archive_dir.as_uri()
    logs = {stream: StreamLog.open(log_dir / stream, stream, read_only=True) for stream in streams}
    try:
        archiver = LogArchiver(ArchiveLocation(uri), lambda: logs, clock=lambda: 0)
        archiver.load()
        archiver.run_once()
    finally:
        for log in logs.values():
            log.close()
    return uri


def flip_byte_mid_file(path: Path) -> CorruptEntry:
    """Damage a segment in its middle; the corrupt entry a scan now stops at."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))
    last = list(scan_segment(path, path.parent.name))[-1]
    assert isinstance(last, CorruptEntry)
    return last


def commit_ends(path: Path) -> list[int]:
    """The byte positions right after each COMMIT entry of a segment file."""
    data = path.read_bytes()
    ends, at = [], 16
    while at < len(data):
        (length,) = struct.unpack_from(">I", data, at)
        if data[at + 8] == 2:
            ends.append(at + 8 + length)
        at += 8 + length
    return ends
