"""One segment file: its durable extent, statistics and sparse index; planned appends.

A :class:`Segment` is mutated only by the writer (under the log's lock) and
only after the bytes it describes are durable: :meth:`Segment.apply` first
extends the index, then ``size``, then ``end_offset``. Readers on other
threads read those fields without a lock and never look past them, so they
see durable data only.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path

from millrace.dataplane import LogBatch, LogEntryError, scan_log
from millrace.injector.log._fileio import Stretches, fsync_dir, write_all
from millrace.injector.log._format import (
    HEADER_SIZE,
    encode_header,
    encode_request,
    index_name,
    segment_name,
)
from millrace.injector.log._index import SegmentSummary, write_index
from millrace.injector.log._types import AppendRequest, AppendResult, LogConfig, SegmentInfo
from millrace.injector.log.errors import LogCorruptedError

READ_CHUNK_BYTES = 256 << 10
_first = itemgetter(0)


class Segment:
    """The state of one segment file (see the module docstring for who may change it)."""

    def __init__(
        self, directory: Path, base_offset: int, *, created_ms: int, index_every: int
    ) -> None:
        self.path = directory / segment_name(base_offset)
        self.index_path = directory / index_name(base_offset)
        self.base_offset = base_offset
        self.end_offset = base_offset
        self.size = HEADER_SIZE
        """Durable bytes: the file may be longer (a torn tail), never read past this."""
        self.sealed = False
        self.records = 0
        self.commits = 0
        self.min_event_ms = self.max_event_ms = 0  # meaningful when records > 0
        self.min_ingest_ms = self.max_ingest_ms = 0  # meaningful when commits > 0
        self.created_ms = created_ms
        """First append time; for a segment without commits, when its file was created."""
        self.index_every = index_every
        self.index: list[tuple[int, int]] = []
        """(offset, position) of offsets base, base + index_every, ... (append-only)."""
        self.fd: int | None = None
        """O_APPEND write descriptor of the active segment."""

    # -- creating and loading ------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, *, created_ms: int, index_every: int, fsync: bool
    ) -> Segment:
        """Create a new, empty active segment file (header only), durable when ``fsync``."""
        segment = cls(directory, base_offset, created_ms=created_ms, index_every=index_every)
        fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            write_all(fd, encode_header(base_offset))
            if fsync:
                os.fsync(fd)
                fsync_dir(directory)
        except BaseException:
            os.close(fd)
            raise
        segment.fd = fd
        return segment

    @classmethod
    def from_summary(cls, directory: Path, summary: SegmentSummary) -> Segment:
        """A sealed segment as its index file describes it."""
        segment = cls(
            directory,
            summary.base_offset,
            created_ms=summary.created_ms,
            index_every=summary.index_every,
        )
        segment.end_offset = summary.end_offset
        segment.size = summary.size_bytes
        segment.sealed = True
        segment.records = summary.records
        segment.commits = summary.commits
        segment.min_event_ms, segment.max_event_ms = summary.min_event_ms, summary.max_event_ms
        segment.min_ingest_ms, segment.max_ingest_ms = summary.min_ingest_ms, summary.max_ingest_ms
        segment.index = list(summary.index)
        return segment

    def open_for_append(self) -> None:
        """Open the write descriptor of the (recovered) active segment."""
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def summary(self) -> SegmentSummary:
        """What the index file of this segment stores."""
        return SegmentSummary(
            base_offset=self.base_offset,
            end_offset=self.end_offset,
            records=self.records,
            commits=self.commits,
            size_bytes=self.size,
            min_event_ms=self.min_event_ms,
            max_event_ms=self.max_event_ms,
            min_ingest_ms=self.min_ingest_ms,
            max_ingest_ms=self.max_ingest_ms,
            created_ms=self.created_ms,
            index_every=self.index_every,
            index=tuple(self.index),
        )

    def info(self) -> SegmentInfo:
        """The public description of this segment."""
        has_records = self.records > 0
        return SegmentInfo(
            path=str(self.path),
            base_offset=self.base_offset,
            end_offset=self.end_offset,
            size_bytes=self.size,
            sealed=self.sealed,
            records=self.records,
            min_event_ms=self.min_event_ms if has_records else None,
            max_event_ms=self.max_event_ms if has_records else None,
            created_ms=self.created_ms,
            min_ingest_ms=self.min_ingest_ms if self.commits else None,
            max_ingest_ms=self.max_ingest_ms if self.commits else None,
        )

    # -- writing ---------------------------------------------------------------

    def write(self, data: bytes, *, fsync: bool) -> None:
        """Append ``data`` to the file with one write (and one fsync); publishes nothing."""
        assert self.fd is not None, "only the active segment is written"
        write_all(self.fd, data)
        if fsync:
            os.fsync(self.fd)

    def apply(self, chunk: PendingChunk) -> None:
        """Publish a chunk whose bytes are now durable (index, then size, then end offset)."""
        if chunk.records:
            if self.records:
                self.min_event_ms = min(self.min_event_ms, chunk.min_event_ms)
                self.max_event_ms = max(self.max_event_ms, chunk.max_event_ms)
            else:
                self.min_event_ms, self.max_event_ms = chunk.min_event_ms, chunk.max_event_ms
        if chunk.commits:
            if self.commits:
                self.min_ingest_ms = min(self.min_ingest_ms, chunk.now_ms)
                self.max_ingest_ms = max(self.max_ingest_ms, chunk.now_ms)
            else:
                self.min_ingest_ms = self.max_ingest_ms = self.created_ms = chunk.now_ms
        self.records += chunk.records
        self.commits += chunk.commits
        self.index.extend(chunk.index)
        self.size = chunk.position
        self.end_offset = chunk.end_offset

    def seal(self, *, fsync: bool) -> None:
        """Write the index file and close the write descriptor; the segment is immutable now."""
        write_index(self.index_path, self.summary(), fsync=fsync)
        self.close()
        self.sealed = True

    def close(self) -> None:
        """Close the write descriptor, if open."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    # -- reading -------------------------------------------------------------

    def read(self, from_offset: int, stop_offset: int, max_records: int) -> LogBatch:
        """Up to ``max_records`` records from ``from_offset``, all below ``stop_offset``.

        Seeks to the nearest index entry at or before ``from_offset``; the entries are
        read :data:`READ_CHUNK_BYTES` at a time and checked natively
        (:func:`millrace.dataplane.scan_log`). Raises :class:`LogCorruptedError` if an
        entry in the way fails validation and ``FileNotFoundError`` if retention
        deleted the file.
        """
        at = bisect_right(self.index, from_offset, key=_first) - 1
        expected, position = self.index[at] if at >= 0 else (self.base_offset, HEADER_SIZE)
        end = self.size
        pieces: list[LogBatch] = []
        wanted = max_records
        try:
            with open(self.path, "rb") as f:
                stretches = Stretches(f, position, end, READ_CHUNK_BYTES)
                while True:
                    data, complete = stretches.read()
                    batch, consumed, expected, finished = scan_log(
                        data,
                        position=stretches.position,
                        expected=expected,
                        from_offset=from_offset,
                        stop_offset=stop_offset,
                        max_records=wanted,
                        complete=complete,
                    )
                    pieces.append(batch)
                    wanted -= len(batch)
                    if finished or complete:
                        break
                    stretches.consume(consumed)
        except LogEntryError as error:
            position, reason = error.args
            raise LogCorruptedError(str(self.path), position, reason) from error
        return pieces[0] if len(pieces) == 1 else LogBatch.concat(pieces)


class PendingChunk:
    """The entries one ``append`` call adds to one segment, encoded but not yet written.

    Planning an append only builds chunks, so a malformed request fails the
    call before anything reaches a file.
    """

    def __init__(
        self,
        segment: Segment | None,
        *,
        base_offset: int,
        position: int,
        next_index: int,
        first_append_ms: int | None,
        index_every: int,
        now_ms: int,
    ) -> None:
        self.segment = segment
        """The active segment it extends; None for a segment this call creates."""
        self.base_offset = base_offset
        self.parts: list[bytes] = []
        self.position = position
        self.next_index = next_index
        self.first_append_ms = first_append_ms
        self.index_every = index_every
        self.now_ms = now_ms
        self.index: list[tuple[int, int]] = []
        self.records = 0
        self.commits = 0
        self.requests = 0
        """Requests added by this call (``commits`` counts the same for a fresh chunk)."""
        self.min_event_ms = self.max_event_ms = 0
        self.end_offset = base_offset

    @classmethod
    def extending(cls, segment: Segment, now_ms: int) -> PendingChunk:
        """A chunk appended to the active ``segment``."""
        chunk = cls(
            segment,
            base_offset=segment.base_offset,
            position=segment.size,
            next_index=segment.base_offset + len(segment.index) * segment.index_every,
            first_append_ms=segment.created_ms if segment.commits else None,
            index_every=segment.index_every,
            now_ms=now_ms,
        )
        chunk.end_offset = segment.end_offset
        return chunk

    @classmethod
    def starting(cls, base_offset: int, index_every: int, now_ms: int) -> PendingChunk:
        """A chunk that opens a new segment at ``base_offset``."""
        return cls(
            None,
            base_offset=base_offset,
            position=HEADER_SIZE,
            next_index=base_offset,
            first_append_ms=None,
            index_every=index_every,
            now_ms=now_ms,
        )

    def due_for_roll(self, config: LogConfig) -> bool:
        """True if the next request must go to a new segment (this one is full or old)."""
        if self.first_append_ms is None:
            return False  # never roll an empty segment
        return (
            self.position >= config.segment_bytes
            or self.now_ms - self.first_append_ms >= config.segment_ms
        )

    def add(self, request: AppendRequest, first_offset: int) -> tuple[int, int]:
        """Encode ``request``'s records and its COMMIT entry (offsets from ``first_offset``);
        the request's oldest and newest event times (0, 0 without records)."""
        records = request.records
        self.position, self.next_index, low, high = encode_request(
            self.parts,
            records,
            request.idempotency_key,
            request.source,
            offset=first_offset,
            ingest_ms=self.now_ms,
            position=self.position,
            next_index=self.next_index,
            index_every=self.index_every,
            index=self.index,
        )
        count = len(records)
        if count:
            if self.records:
                self.min_event_ms = min(self.min_event_ms, low)
                self.max_event_ms = max(self.max_event_ms, high)
            else:
                self.min_event_ms, self.max_event_ms = low, high
            self.records += count
        self.commits += 1
        self.requests += 1
        self.end_offset = first_offset + count
        if self.first_append_ms is None:
            self.first_append_ms = self.now_ms
        return low, high


def plan_appends(
    active: Segment,
    next_offset: int,
    config: LogConfig,
    requests: Sequence[AppendRequest],
    now_ms: int,
) -> tuple[list[PendingChunk], list[AppendResult]]:
    """The chunks that append ``requests`` after ``active`` (rolling to a new segment
    between requests when one is due) and where each request lands; nothing is
    written. A request the format cannot hold raises ``ValueError``/``TypeError``
    naming it."""
    chunk = PendingChunk.extending(active, now_ms)
    chunks = [chunk]
    results = []
    offset = next_offset
    for number, request in enumerate(requests):
        if chunk.due_for_roll(config):
            chunk = PendingChunk.starting(offset, config.index_every, now_ms)
            chunks.append(chunk)
        try:
            low, high = chunk.add(request, offset)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"append request {number} is malformed: {exc}") from exc
        results.append(AppendResult(offset, chunk.end_offset - offset, low, high))
        offset = chunk.end_offset
    return chunks, results
