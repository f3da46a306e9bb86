"""The injector's archiver: every sealed segment copied to the archive URI, on its own thread.

Copies run off the ticker (a 64 MiB segment to S3 takes seconds; watermarks are
published every 50 ms). Local retention asks :meth:`LogArchiver.safe_offset`
so that a segment leaves the local disk only once the archive holds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from millrace.injector.archive._location import ArchiveLocation
from millrace.injector.archive._manifest import ManifestEntry, segment_name
from millrace.injector.log import SegmentInfo, StreamLog

log = logging.getLogger(__name__)


class LogArchiver:
    """Archives the sealed segments of the logs ``logs()`` returns into ``location``; applies
    the archive's own retention (``retention_ms``; None keeps everything: the log as system
    of record)."""

    def __init__(
        self,
        location: ArchiveLocation,
        logs: Callable[[], Mapping[str, StreamLog]],
        *,
        clock: Callable[[], int],
        retention_ms: int | None = None,
        interval_s: float = 1.0,
        on_archived: Callable[[str, ManifestEntry], None] | None = None,
    ) -> None:
        self.location = location
        self._logs = logs
        self._clock = clock
        self._retention_ms = retention_ms
        self._interval_s = interval_s
        self._on_archived = on_archived
        self._archived: dict[str, dict[int, ManifestEntry]] = {}
        """Per stream, base offset -> entry of what the archive holds."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="log-archiver", daemon=True)
        self._floor: dict[str, int] = {}
        """Per stream, the archive's retention removed the offsets below this."""
        self._failing: dict[str, str] = {}

    def load(self) -> None:
        """Read what the archive holds (raises :class:`ArchiveError` if it cannot be read)."""
        for stream in self._logs():
            entries = self.location.entries(stream)
            floor = self.location.expired_before(stream)
            with self._lock:
                self._archived[stream] = {e.base_offset: e for e in entries}
                self._floor[stream] = floor

    def start(self) -> None:
        """:meth:`load`, then copy every ``interval_s`` on the archiver's thread."""
        self.load()
        self._thread.start()

    def stop(self) -> None:
        """Stop after the copy in progress (a later start redoes a copy cut short)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stopping.wait(self._interval_s):
            self.run_once()

    def run_once(self) -> int:
        """Archive what is sealed and not archived yet, every stream; the number copied.

        A failure (the archive unreachable, a full bucket) is logged once per streak
        and retried next time; local retention waits for it meanwhile."""
        copied = 0
        for stream, stream_log in self._logs().items():
            try:
                copied += self._archive_stream(stream, stream_log)
                if self._retention_ms is not None:
                    self._expire(stream, self._clock() - self._retention_ms)
            except Exception as exc:  # the thread must go on; the error is the operator's
                if self._failing.get(stream) != str(exc):
                    log.error("archive %s: stream %s: %s", self.location.uri, stream, exc)
                self._failing[stream] = str(exc)
                continue
            if self._failing.pop(stream, None) is not None:
                log.info("archive %s: stream %s archives again", self.location.uri, stream)
        return copied

    def pending(self, stream: str) -> int:
        """Sealed local segments of ``stream`` not archived yet."""
        return len(self._unarchived(stream, self._logs()[stream].segments()))

    def safe_offset(self, stream: str) -> int:
        """Every sealed local segment that ends at or below this offset is archived."""
        segments = self._logs()[stream].segments()
        unarchived = self._unarchived(stream, segments)
        if unarchived:
            return unarchived[0].base_offset
        return segments[-1].base_offset if segments else 0

    def _unarchived(self, stream: str, segments: list[SegmentInfo]) -> list[SegmentInfo]:
        with self._lock:
            held, floor = self._archived.get(stream, {}), self._floor.get(stream, 0)
            return [
                s
                for s in segments
                if s.sealed and s.base_offset not in held and s.end_offset > floor
            ]

    def _archive_stream(self, stream: str, stream_log: StreamLog) -> int:
        copied = 0
        for segment in self._unarchived(stream, stream_log.segments()):
            if self._stopping.is_set():
                break
            entry = self.location.put_segment(
                stream,
                Path(segment.path),
                lambda size, crc, s=segment: self._entry(stream, s, size, crc),  # type: ignore[misc]
            )
            with self._lock:
                self._archived.setdefault(stream, {})[entry.base_offset] = entry
            copied += 1
            log.info(
                "archive %s: stream %s segment %s archived (%d records, %d bytes)",
                self.location.uri, stream, entry.segment, entry.records, entry.size_bytes,
                extra={"event": "segment_archived", "stream": stream, "segment": entry.segment},
            )  # fmt: skip
            if self._on_archived is not None:
                self._on_archived(stream, entry)
        return copied

    def _entry(self, stream: str, segment: SegmentInfo, size: int, crc: int) -> ManifestEntry:
        if size != segment.size_bytes:
            raise OSError(
                f"{segment.path}: copied {size} bytes, the sealed segment has {segment.size_bytes}"
            )
        return ManifestEntry(
            stream=stream,
            segment=segment_name(segment.base_offset),
            base_offset=segment.base_offset,
            end_offset=segment.end_offset,
            records=segment.records,
            min_event_ms=segment.min_event_ms,
            max_event_ms=segment.max_event_ms,
            min_ingest_ms=segment.min_ingest_ms,
            max_ingest_ms=segment.max_ingest_ms,
            size_bytes=size,
            crc32=crc,
            archived_ms=self._clock(),
        )

    def _expire(self, stream: str, older_than_ms: int) -> None:
        """Drop the oldest archived segments whose last append is before the cutoff
        (a prefix only: offsets in the archive stay dense)."""
        with self._lock:
            entries = sorted(self._archived.get(stream, {}).values(), key=lambda e: e.base_offset)
        doomed = []
        for entry in entries:
            newest = entry.max_ingest_ms if entry.max_ingest_ms is not None else entry.archived_ms
            if newest >= older_than_ms:
                break
            doomed.append(entry)
        if not doomed:
            return
        self.location.set_expired_before(stream, doomed[-1].end_offset)
        with self._lock:
            self._floor[stream] = doomed[-1].end_offset
        for entry in doomed:
            self.location.delete_segment(entry)
            with self._lock:
                self._archived[stream].pop(entry.base_offset, None)
            log.info(
                "archive %s: retention deleted %s/%s", self.location.uri, stream, entry.segment
            )
