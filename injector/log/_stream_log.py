"""``StreamLog``: the durable, append-only log of one source stream."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from time import time_ns
from types import TracebackType

from millrace.dataplane import LogBatch
from millrace.injector.log._fileio import fsync_dir, lock_directory
from millrace.injector.log._format import stream_tag
from millrace.injector.log._lost import LostRange, read_lost, record_lost
from millrace.injector.log._reading import (
    iter_commits,
    offset_for_time,
    read_records,
    retention_prefix,
)
from millrace.injector.log._recovery import load_segments
from millrace.injector.log._repair import repair_after_failure
from millrace.injector.log._segment import PendingChunk, Segment, plan_appends
from millrace.injector.log._types import (
    AppendRequest,
    AppendResult,
    Commit,
    LogConfig,
    LogRecord,
    RecoveryReport,
    SegmentInfo,
)
from millrace.injector.log.errors import (
    LogClosedError,
    LogWriteError,
    OffsetDeletedError,
)


def wall_clock_ms() -> int:
    """Milliseconds since the Unix epoch from the system clock.

    The log's own (not ``statestore``'s): Spark executors import this package
    and should not need RocksDB for it.
    """
    return time_ns() // 1_000_000


class StreamLog:
    """The log of one stream in its own directory: segments of entries, offsets 0, 1, ...

    One writer thread calls :meth:`append`; :meth:`delete_before` and
    :meth:`seal_if_due` may run on another (all three hold the log's lock,
    so a roll never interleaves with an append). Any thread may call
    :meth:`read`, :meth:`commits`, :meth:`offset_for_time` and
    :meth:`segments` meanwhile and sees durable records only. Another
    process may read the segment files (:func:`injector.log.scan_segment`) but
    only one process may open a stream for writing (a lock file enforces it).
    """

    def __init__(
        self,
        directory: Path,
        stream: str,
        segments: list[Segment],
        *,
        config: LogConfig,
        clock: Callable[[], int],
        recovery: RecoveryReport | None,
        lock_fd: int | None,
        lost: tuple[LostRange, ...] = (),
    ) -> None:
        """Use :meth:`open`."""
        self._directory = directory
        self._stream = stream
        self._config = config
        self._clock = clock
        self._prefix = stream_tag(stream)
        self._segments: tuple[Segment, ...] = tuple(segments)
        """Replaced, never mutated: readers take a snapshot."""
        self._next_offset = segments[-1].end_offset if segments else 0
        self._lock = threading.Lock()
        self._lock_fd = lock_fd
        self._closed = False
        self._failed: str | None = None
        self.recovery = recovery
        """What opening found at the end of the active segment; None for a new log."""
        self._lost = lost

    @classmethod
    def open(
        cls,
        directory: str | Path,
        stream: str,
        *,
        config: LogConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        read_only: bool = False,
    ) -> StreamLog:
        """Open (creating it if needed) and recover the log of ``stream`` in ``directory``.

        ``directory`` is the stream's own directory, by convention
        ``<log_dir>/<stream>`` (what ``millrace log --dir LOG_DIR`` expects);
        ``stream`` names the stream in record ids. Recovery cuts the active
        segment back to its last valid COMMIT and reports it in
        :attr:`recovery` (details in ``injector/log/_recovery.py``).
        ``read_only`` opens an existing log without locking or changing it
        (for inspection next to a running writer); it cannot append.
        Raises :class:`LogLockedError` if another handle writes the stream and
        :class:`LogCorruptedError` if durable data does not check out.
        """
        if not stream:
            raise ValueError("a stream log needs a stream name")
        config = config or LogConfig()
        path = Path(directory)
        lock_fd = None
        if read_only:
            if not path.is_dir():
                raise FileNotFoundError(f"no log directory {str(path)!r} (stream {stream!r})")
        else:
            path.mkdir(parents=True, exist_ok=True)
            lock_fd = lock_directory(path)
        try:
            lost = read_lost(path)
            segments, report = load_segments(
                path, config=config, clock=clock, read_only=read_only, lost=lost
            )
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        return cls(
            path,
            stream,
            segments,
            config=config,
            clock=clock,
            recovery=report,
            lock_fd=lock_fd,
            lost=lost,
        )

    # -- properties ------------------------------------------------------------

    @property
    def stream(self) -> str:
        """The stream this log holds."""
        return self._stream

    @property
    def directory(self) -> Path:
        """The stream's directory (as given to :meth:`open`): segments, index files, ``LOCK``."""
        return self._directory

    @property
    def next_offset(self) -> int:
        """The offset the next record gets; every offset below it is durable."""
        return self._next_offset

    @property
    def first_offset(self) -> int:
        """The oldest offset still held (retention deletes older ones)."""
        segments = self._segments
        return segments[0].base_offset if segments else 0

    # -- writing ---------------------------------------------------------------

    def append(self, requests: Sequence[AppendRequest]) -> list[AppendResult]:
        """Make ``requests`` durable, each as a whole, and return where each one landed.

        1. Plan: encode every request's records and COMMIT entry into chunks,
           one per segment, rolling to a new segment between requests when the
           active one is full or old. A malformed request raises here
           (``ValueError``/``TypeError``) and nothing is written.
        2. Write: per chunk, one ``write`` and one ``fsync`` (group commit:
           normally a call touches one segment, so one of each per call).
        3. Publish: the segment's index and size, then :attr:`next_offset`.

        A failed write raises :class:`LogWriteError` whose ``published`` lists
        the results of the requests written before it (a prefix: earlier chunks
        of the same call); no later request is published. The next call first
        cuts the active segment back to its durable end (or finishes a failed
        roll), so the log writes again as soon as the disk does (a full disk
        freed). Until then every call raises :class:`LogWriteError`.
        """
        if not requests:
            return []
        with self._lock:
            self._check_writable()
            now_ms = self._clock()
            chunks, results = plan_appends(
                self._segments[-1], self._next_offset, self._config, requests, now_ms
            )
            done = 0
            for chunk in chunks:
                try:
                    self._write(chunk)
                except LogWriteError as error:
                    error.published = results[:done]
                    raise
                done += chunk.requests
        return results

    def _write(self, chunk: PendingChunk) -> None:
        segment = self._segments[-1]
        try:
            if chunk.segment is None:
                segment = self._roll(chunk.base_offset, chunk.now_ms)
            if chunk.parts:
                segment.write(b"".join(chunk.parts), fsync=self._config.fsync)
        except OSError as exc:
            self._failed = f"{segment.path}: {exc}"
            raise LogWriteError(str(segment.path), str(exc)) from exc
        if chunk.parts:
            segment.apply(chunk)
            self._next_offset = chunk.end_offset

    def _roll(self, base_offset: int, now_ms: int) -> Segment:
        """Seal the active segment (index file) and create the next one, both durable."""
        self._segments[-1].seal(fsync=self._config.fsync)
        segment = Segment.create(
            self._directory,
            base_offset,
            created_ms=now_ms,
            index_every=self._config.index_every,
            fsync=self._config.fsync,  # also fsyncs the directory: the index rename too
        )
        self._segments = (*self._segments, segment)
        return segment

    def seal_if_due(self) -> SegmentInfo | None:
        """Seal the active segment without an append if it is due for a roll and holds records.

        Due means what ``append`` checks (its first append is ``segment_ms``
        old, or it reached ``segment_bytes``), but ``append`` only checks when
        the next request arrives: on a quiet stream the tail would stay in the
        active segment, which readers of sealed segments never see. The roll
        is the one ``append`` does (index file, then a new empty active
        segment at :attr:`next_offset`), under the same lock. Returns the
        sealed segment, or None if it was not due. A failed roll raises
        :class:`LogWriteError` and leaves the log refusing appends until reopened.
        """
        with self._lock:
            self._check_writable()
            active = self._segments[-1]
            if not active.records:
                return None
            now_ms = self._clock()
            chunk = PendingChunk.extending(active, now_ms)
            if not chunk.due_for_roll(self._config):
                return None
            try:
                self._roll(active.end_offset, now_ms)
            except OSError as exc:
                self._failed = f"{active.path}: {exc}"
                raise LogWriteError(str(active.path), str(exc)) from exc
            return active.info()

    def _check_writable(self) -> None:
        """Raise unless this handle may write; after a failed write or roll, first put
        the files right (:func:`repair_after_failure`) or raise :class:`LogWriteError`."""
        self._require_writer()
        if self._failed is not None:
            try:
                self._segments = repair_after_failure(
                    self._directory, self._segments, self._config, self._clock
                )
            except OSError as exc:
                raise LogWriteError(
                    str(self._segments[-1].path), f"still failing ({exc}; first: {self._failed})"
                ) from exc
            self._failed = None

    def _require_writer(self) -> None:
        if self._closed:
            raise LogClosedError(str(self._directory))
        if self._lock_fd is None:
            raise LogClosedError(str(self._directory), "open read-only")

    def delete_before(self, offset: int, *, older_than_ms: int | None = None) -> list[str]:
        """Retention: delete the oldest sealed segments that lie wholly below ``offset``.

        With ``older_than_ms``, a segment also needs its newest ingest time
        (its last append) to be before that time, in milliseconds since the
        epoch. Only a prefix of the log goes (the first segment that must stay
        stops the deletion, so offsets stay dense) and never the active
        segment. Returns the deleted segment paths.
        """
        with self._lock:
            self._require_writer()
            segments = self._segments
            doomed = retention_prefix(segments, offset, older_than_ms)
            if not doomed:
                return []
            self._segments = segments[doomed:]
            for segment in segments[:doomed]:
                segment.path.unlink(missing_ok=True)  # the .log first: see _recovery
                segment.index_path.unlink(missing_ok=True)
            if self._config.fsync:
                fsync_dir(self._directory)
        return [str(segment.path) for segment in segments[:doomed]]

    # -- reading ---------------------------------------------------------------

    def read(self, from_offset: int, max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` durable records from ``from_offset`` on, in offset order.

        Returns fewer (or none) at the end of the log. Raises
        :class:`OffsetDeletedError` below :attr:`first_offset` and
        :class:`LogCorruptedError` if an entry on the way fails its checks.
        Safe from any thread while another appends.
        """
        return self.read_batch(from_offset, max_records).log_records(LogRecord, self._prefix)

    def read_batch(self, from_offset: int, max_records: int) -> LogBatch:
        """:meth:`read`'s records held natively (what the forwarder frames without a
        Python object per record); ids are the stream's tag then the offset."""
        stop = self._next_offset  # before the segments: every offset below it is in them
        segments = self._segments
        try:
            return read_records(segments, stop, from_offset, max_records, self._lost)
        except FileNotFoundError:  # retention deleted a segment while we read it
            raise OffsetDeletedError(from_offset, self.first_offset) from None

    @property
    def lost(self) -> tuple[LostRange, ...]:
        """The offset ranges recorded as lost (``millrace log accept-loss``), oldest first."""
        return self._lost

    def skip_lost(self, end: int) -> LostRange:
        """Record offsets :attr:`next_offset` .. ``end - 1`` as lost (durably, first) and
        continue numbering at ``end``: the active segment is sealed and the next one
        starts there. For a log whose tail was lost below offsets a consumer
        acknowledged: no record id is used twice."""
        with self._lock:
            self._check_writable()
            first = self._next_offset
            if end <= first:
                raise ValueError(f"offset {end} is not past the log's end {first}")
            lost = LostRange(first, end, self._clock())
            self._lost = record_lost(self._directory, lost)
            self._roll(end, lost.recorded_ms)
            self._next_offset = end
            return lost

    @property
    def stream_tag(self) -> bytes:
        """The first 8 bytes of every record id of this stream."""
        return self._prefix

    def offset_for_time(self, event_time_ms: int) -> int:
        """Where to start scanning for records with event time >= ``event_time_ms``
        (:func:`~injector.log._reading.offset_for_time`)."""
        return offset_for_time(self._segments, self._next_offset, event_time_ms)

    def commits(self, since_ms: int | None = None) -> Iterator[Commit]:
        """The durable COMMIT markers in log order, for rebuilding idempotency maps and
        source positions.

        With ``since_ms``, only commits made at or after that time (ms since
        the epoch); whole segments whose last append is older are skipped
        without being read. Segments deleted by retention meanwhile are skipped.
        """
        return iter_commits(self._segments, since_ms)

    def segments(self) -> list[SegmentInfo]:
        """Every segment, oldest first; the last one is the active segment of a writable log."""
        with self._lock:
            return [segment.info() for segment in self._segments]

    # -- closing ---------------------------------------------------------------

    def close(self) -> None:
        """Close the active segment and release the stream's lock. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for segment in self._segments:
                segment.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> StreamLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StreamLog({str(self._directory)!r}, next_offset={self._next_offset})"
