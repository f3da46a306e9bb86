"""Reading a stream log's segments: records by offset, and its COMMIT markers.

Functions over a snapshot of the segment list (``StreamLog`` replaces the list
and never mutates it), so readers need no lock while a writer appends.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

from millrace.dataplane import LogBatch
from millrace.injector.log._format import HEADER_SIZE, EntryError, iter_requests
from millrace.injector.log._lost import LostRange, lost_gap
from millrace.injector.log._segment import Segment
from millrace.injector.log._types import Commit
from millrace.injector.log.errors import LogCorruptedError, OffsetDeletedError


def read_records(
    segments: Sequence[Segment],
    stop: int,
    from_offset: int,
    max_records: int,
    lost: tuple[LostRange, ...] = (),
) -> LogBatch:
    """Up to ``max_records`` records from ``from_offset`` on, below ``stop`` (the durable
    end), at consecutive offsets: a read stops before a ``lost`` range, and one from
    inside it starts above it. Raises :class:`OffsetDeletedError` below the first
    segment, :class:`LogCorruptedError` on a bad entry or any other gap, and
    ``FileNotFoundError`` if a segment was deleted meanwhile."""
    if from_offset < 0:
        raise ValueError(f"offsets are not negative, got {from_offset}")
    if max_records <= 0 or from_offset >= stop:
        return LogBatch.concat([])
    first = segments[0].base_offset
    if from_offset < first:
        raise OffsetDeletedError(from_offset, first)
    at = bisect_right(segments, from_offset, key=_base_offset) - 1
    pieces: list[LogBatch] = []
    read = 0
    offset = from_offset
    while True:
        segment = segments[at]
        records = segment.read(offset, stop, max_records - read)
        pieces.append(records)
        read += len(records)
        offset += len(records)
        if read >= max_records or offset >= stop:
            return pieces[0] if len(pieces) == 1 else LogBatch.concat(pieces)
        at += 1
        if at < len(segments) and segments[at].base_offset != offset:
            end, base = segment.end_offset, segments[at].base_offset
            if lost_gap(lost, end, base) and end <= offset < base:
                if read:
                    return pieces[0] if len(pieces) == 1 else LogBatch.concat(pieces)
                offset = base  # the lost offsets hold nothing: go on above them
        if at == len(segments) or segments[at].base_offset != offset:
            raise LogCorruptedError(
                str(segment.path), None, f"it ends before offset {offset}, which it should hold"
            )


def iter_commits(segments: Sequence[Segment], since_ms: int | None) -> Iterator[Commit]:
    """COMMIT markers in log order (made at or after ``since_ms``, if given); segments
    deleted meanwhile are skipped."""
    for segment in segments:
        end = segment.size  # durable, and always the end of a COMMIT
        if not segment.commits:
            continue
        if since_ms is not None and segment.max_ingest_ms < since_ms:
            continue
        try:
            with open(segment.path, "rb") as f:
                for _records, commit, _end in iter_requests(
                    f, segment.base_offset, HEADER_SIZE, end, keep_records=False
                ):
                    if since_ms is None or commit.committed_at_ms >= since_ms:
                        yield commit
        except FileNotFoundError:
            continue
        except EntryError as error:
            raise LogCorruptedError(str(segment.path), error.position, error.reason) from error


def _base_offset(segment: Segment) -> int:
    return segment.base_offset


def offset_for_time(segments: Sequence[Segment], stop: int, event_time_ms: int) -> int:
    """Where to start scanning for records with event time >= ``event_time_ms``: the
    base offset of the first segment whose newest event time is at least that (event
    times are not ordered: records before it may still be later, and records after it
    earlier), or ``stop`` (the log's end) when no segment has one."""
    for segment in segments:
        if segment.records and segment.max_event_ms >= event_time_ms:
            return min(segment.base_offset, stop)
    return stop


def retention_prefix(segments: Sequence[Segment], offset: int, older_than_ms: int | None) -> int:
    """How many of the oldest ``segments`` retention may delete: sealed ones wholly below
    ``offset`` (and, with ``older_than_ms``, whose last append is older), never the last
    (active) one, stopping at the first that must stay so that offsets stay dense."""
    doomed = 0
    for segment in segments[:-1]:
        if not segment.sealed or segment.end_offset > offset:
            break
        if older_than_ms is not None and segment.commits and segment.max_ingest_ms >= older_than_ms:
            break
        doomed += 1
    return doomed
