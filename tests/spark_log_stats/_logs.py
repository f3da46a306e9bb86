"""Logs the ``log_stats`` tests write and what their statistics must be."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from millrace.injector.log import (
    AppendRequest,
    LogConfig,
    LogRecord,
    SegmentInfo,
    StreamLog,
)

T0 = 1_700_000_000_000


def write_log(directory: Path, stream: str, requests: int, *, segment_bytes: int = 2048) -> None:
    """A closed log of ``requests`` requests of 1..7 records with scattered event times."""
    rng = random.Random(stream)
    log = StreamLog.open(directory / stream, stream, config=LogConfig(segment_bytes=segment_bytes))
    for number in range(requests):
        records = [
            (
                f"k{i}".encode(),
                f"{stream}-{number}-{i}".encode() * 3,
                T0 + rng.randrange(-5000, 5000),
            )
            for i in range(rng.randint(1, 7))
        ]
        log.append([AppendRequest(records=records, idempotency_key=f"r{number}".encode())])
    log.close()


def log_view(stream_dir: Path, stream: str) -> tuple[list[SegmentInfo], list[LogRecord]]:
    """The log's own description of itself: its segments and every durable record."""
    log = StreamLog.open(stream_dir, stream, read_only=True)
    try:
        return log.segments(), log.read(0, 10**9)
    finally:
        log.close()


def flip_byte_mid_file(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))


def expected_stats(
    stream: str, segments: list[SegmentInfo], records: list[LogRecord]
) -> dict[str, Any]:
    """Totals over ``segments`` as the log itself reports them."""
    held = [r for r in records for s in segments if s.base_offset <= r.offset < s.end_offset]
    return {
        "stream": stream,
        "records": sum(s.records for s in segments),
        "held": len(held),
        "min_event_ms": min((s.min_event_ms for s in segments if s.min_event_ms is not None),
                            default=None),
        "max_event_ms": max((s.max_event_ms for s in segments if s.max_event_ms is not None),
                            default=None),
        "min_ingest_ms": min((r.ingest_time_ms for r in held), default=None),
        "max_ingest_ms": max((r.ingest_time_ms for r in held), default=None),
        "segments": len(segments),
    }  # fmt: skip
