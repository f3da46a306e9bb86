"""Deterministic log content for the tests and the crash appender.

Request ``tag`` always has the same records, idempotency key and source, so
a test can check what the log holds against what was appended (or acked)
without keeping a copy.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

from millrace.injector.log import AppendRequest, LogRecord

STREAM = "clicks"
BASE_EVENT_MS = 1_700_000_000_000
WALL_START_MS = 1_700_000_000_000
"""Where the logs' manual clocks start."""
_FILLER = bytes(range(256)) * 16


def record_count(tag: int, *, big_every: int = 0) -> int:
    """How many records request ``tag`` has: 0..40, and 1500 every ``big_every``-th tag."""
    if big_every and tag % big_every == big_every - 1:
        return 1500
    return random.Random(tag).randint(0, 40)


def triples(tag: int, count: int) -> list[tuple[bytes, bytes, int]]:
    """The ``(key, value, event_time_ms)`` records of request ``tag``."""
    rng = random.Random(tag * 7919)
    return [
        (
            b"k%d.%d" % (tag, j),
            _FILLER[(tag + j) % 256 : (tag + j) % 256 + 20 + (tag * 31 + j) % 90],
            BASE_EVENT_MS + rng.randint(-60_000, 600_000),
        )
        for j in range(count)
    ]


def request(tag: int, count: int | None = None, *, big_every: int = 0) -> AppendRequest:
    """Request ``tag``: its records, idempotency key ``req-<tag>`` and source ``pos-<tag>``."""
    n = record_count(tag, big_every=big_every) if count is None else count
    return AppendRequest(
        records=triples(tag, n), idempotency_key=b"req-%d" % tag, source=b"pos-%d" % tag
    )


def tag_of(idempotency_key: bytes) -> int:
    """The tag in an idempotency key made by :func:`request`."""
    assert idempotency_key.startswith(b"req-"), idempotency_key
    return int(idempotency_key[4:])


def matches(record: LogRecord, triple: tuple[bytes, bytes, int]) -> bool:
    """Whether a stored record holds the key, value and event time of ``triple``."""
    return (record.key, record.value, record.event_time_ms) == triple


def entry_bounds(path: Path) -> list[tuple[int, int, int]]:
    """``(start, end, type)`` of every entry of a segment file, decoded from the
    documented layout with ``struct`` only (no log code)."""
    data = path.read_bytes()
    bounds = []
    at = 16
    while at < len(data):
        length, _crc = struct.unpack_from(">II", data, at)
        bounds.append((at, at + 8 + length, data[at + 8]))
        at += 8 + length
    return bounds
