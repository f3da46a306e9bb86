"""The durable log's value types: configuration, records, requests, results and reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from millrace.dataplane import RecordBatch

MINUTE_MS = 60_000


@dataclass(frozen=True, kw_only=True)
class LogConfig:
    """Settings of one stream's log.

    Attributes:
        segment_bytes: roll the active segment once it holds at least this many
            bytes. Rolls happen between requests, never inside one, so a
            segment exceeds this by at most one request.
        segment_ms: roll a non-empty active segment whose first append is at
            least this old (checked when the next request is appended, and by
            ``StreamLog.seal_if_due``, which the injector calls every 10 s so a
            quiet stream's tail is sealed too).
        index_every: one sparse-index entry per this many records of a segment.
        fsync: fsync on every ``append`` call (one per call, group commit). Off
            trades the last calls before a machine crash (not a process crash)
            for speed.
    """

    segment_bytes: int = 64 << 20
    segment_ms: int = 10 * MINUTE_MS
    index_every: int = 1000
    fsync: bool = True

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {self.segment_bytes}")
        if self.segment_ms <= 0:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if not 1 <= self.index_every < 1 << 32:
            raise ValueError(f"index_every must be in [1, 2**32), got {self.index_every}")


class LogRecord(NamedTuple):
    """One durable record of a stream.

    ``record_id`` is :func:`injector.log.record_id` of the stream and offset:
    unique per record, stable across reads, replays and backfills.
    ``ingest_time_ms`` is when the log appended it (the clock of the writer).
    A named tuple: reads make one per record, at a fifth of a frozen dataclass's cost.
    """

    offset: int
    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    ingest_time_ms: int


@dataclass(frozen=True, slots=True, init=False)
class AppendRequest:
    """One client request: records that become durable all together or not at all.

    ``records`` holds ``(key, value, event_time_ms)`` triples, kept as a native
    :class:`~millrace.dataplane.RecordBatch` (a sequence of tuples is converted). The
    ``idempotency_key`` (at most 65,535 bytes) and ``source`` (opaque, for
    example a file source's read position) are stored in the request's
    COMMIT entry and come back from :meth:`StreamLog.commits`. A request may
    carry no records: it then only records its commit.
    """

    records: RecordBatch
    idempotency_key: bytes = b""
    source: bytes = b""

    def __init__(
        self,
        records: RecordBatch | Iterable[tuple[bytes, bytes, int]],
        idempotency_key: bytes = b"",
        source: bytes = b"",
    ) -> None:
        batch = records if isinstance(records, RecordBatch) else RecordBatch(records)
        object.__setattr__(self, "records", batch)
        object.__setattr__(self, "idempotency_key", idempotency_key)
        object.__setattr__(self, "source", source)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where one request's records landed: offsets ``first_offset .. first_offset + count - 1``.

    ``min_event_ms`` and ``max_event_ms`` are the oldest and newest event times among
    them (0 when ``count`` is 0), found while encoding them.
    """

    first_offset: int
    count: int
    min_event_ms: int = 0
    max_event_ms: int = 0


@dataclass(frozen=True, slots=True)
class Commit:
    """The COMMIT entry of one request, as stored after its records."""

    first_offset: int
    count: int
    idempotency_key: bytes
    source: bytes
    committed_at_ms: int


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening the log found at the end of its active segment.

    ``reason`` is empty when the segment ended with a valid commit. Otherwise
    ``truncated_bytes`` bytes after the last valid commit were cut off;
    ``dropped_entries`` counts the complete entries among them plus one for
    the torn or invalid entry (bytes after an invalid entry cannot be framed
    and are counted in ``truncated_bytes`` only).
    """

    segment: str
    truncated_bytes: int
    dropped_entries: int
    reason: str


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment file as :meth:`StreamLog.segments` describes it.

    Offsets ``base_offset .. end_offset - 1`` live in it; ``size_bytes`` is
    its durable size. Event times are None for a segment without records.
    ``created_ms`` is the time of its first append (for an empty segment: when
    its file was created).
    """

    path: str
    base_offset: int
    end_offset: int
    size_bytes: int
    sealed: bool
    records: int
    min_event_ms: int | None
    max_event_ms: int | None
    created_ms: int
    min_ingest_ms: int | None = None
    """The oldest append's time (None for a segment without commits)."""
    max_ingest_ms: int | None = None
    """The newest append's time: retention looks at it."""


@dataclass(frozen=True, slots=True)
class CorruptEntry:
    """A segment entry that failed validation, at byte ``position`` of its file."""

    position: int
    reason: str
