"""The Spark-independent half of ``log_stats``: list segment files, merge per-segment results.

Nothing here imports Spark. :func:`list_segments` lists the segment files
of a local log directory (the ``millrace`` data source plans its input
partitions with it, :mod:`spark_jobs.logsource`); :func:`merge_streams`
folds the per-segment :class:`SegmentStats` that ``log_stats`` aggregates
with Spark into one :class:`StreamStats` per stream on the driver.

The layout read here is ``docs/log-format.md``: ``<log_dir>/<stream>/`` holds
``segment-<base_offset:020d>.log`` files; a segment is sealed (immutable)
when its ``.idx`` exists, and only the last segment of a stream may be
active. A segment that is not the last is sealed even if its index is
missing (writers rebuild a lost index).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from millrace.injector.log import CorruptEntry

SEGMENT_NAME = re.compile(r"segment-(\d{20})\.log")
"""A segment file name; the group is its base offset. ``.idx.tmp`` and other files do not match."""


class LogDirError(Exception):
    """The log directory or a requested stream is not there (``log_stats`` exits with 2)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One segment file to scan: the stream it belongs to, its path and whether it is sealed."""

    stream: str
    path: str
    base_offset: int
    sealed: bool

    @property
    def name(self) -> str:
        """The file name, ``segment-<base_offset:020d>.log``."""
        return os.path.basename(self.path)


@dataclass(frozen=True, slots=True)
class CorruptReport:
    """A corrupt entry: ``stream``, ``segment`` (file name), byte ``position`` and ``reason``."""

    stream: str
    segment: str
    position: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "stream": self.stream,
            "segment": self.segment,
            "position": self.position,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class SegmentStats:
    """What one segment file holds (aggregated by Spark from the rows of its one task).

    ``records`` counts the committed records read before any corrupt entry;
    the ``min_*``/``max_*`` times and ``first_offset``/``last_offset`` are
    over those records (None when there are none). ``corrupt`` is the entry
    at which the scan stopped, if any. ``vanished`` means the file was gone
    when the task opened it (retention deleted it after it was listed):
    nothing was read and it does not count as a segment read.
    """

    stream: str
    path: str
    base_offset: int
    sealed: bool
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_event_ms: int | None = None
    max_event_ms: int | None = None
    min_ingest_ms: int | None = None
    max_ingest_ms: int | None = None
    corrupt: CorruptEntry | None = None
    vanished: bool = False

    @property
    def name(self) -> str:
        """The segment's file name."""
        return os.path.basename(self.path)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-ready values (one entry of ``--json``'s ``segments``)."""
        return {
            "stream": self.stream,
            "path": self.path,
            "segment": self.name,
            "base_offset": self.base_offset,
            "sealed": self.sealed,
            "records": self.records,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "min_event_ms": self.min_event_ms,
            "max_event_ms": self.max_event_ms,
            "min_ingest_ms": self.min_ingest_ms,
            "max_ingest_ms": self.max_ingest_ms,
            "corrupt": (
                None
                if self.corrupt is None
                else {"position": self.corrupt.position, "reason": self.corrupt.reason}
            ),
            "vanished": self.vanished,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SegmentStats:
        """The inverse of :meth:`to_dict`."""
        corrupt = data["corrupt"]
        return cls(
            stream=str(data["stream"]),
            path=str(data["path"]),
            base_offset=int(data["base_offset"]),
            sealed=bool(data["sealed"]),
            records=int(data["records"]),
            first_offset=_opt_int(data["first_offset"]),
            last_offset=_opt_int(data["last_offset"]),
            min_event_ms=_opt_int(data["min_event_ms"]),
            max_event_ms=_opt_int(data["max_event_ms"]),
            min_ingest_ms=_opt_int(data["min_ingest_ms"]),
            max_ingest_ms=_opt_int(data["max_ingest_ms"]),
            corrupt=(
                None
                if corrupt is None
                else CorruptEntry(position=int(corrupt["position"]), reason=str(corrupt["reason"]))
            ),
            vanished=bool(data["vanished"]),
        )


@dataclass(frozen=True, slots=True)
class StreamStats:
    """The merged statistics of one stream over the segments read.

    ``segments`` counts the segment files read (corrupt ones included,
    vanished ones not); ``corrupt`` lists every corrupt entry found, in
    segment order. Merging (:meth:`merge`) is associative and commutative,
    and :meth:`empty` is its identity.
    """

    stream: str
    records: int = 0
    min_event_ms: int | None = None
    max_event_ms: int | None = None
    min_ingest_ms: int | None = None
    max_ingest_ms: int | None = None
    segments: int = 0
    corrupt: tuple[CorruptReport, ...] = ()
    vanished: tuple[str, ...] = field(default=())
    """File names of segments that were gone when their task ran."""

    @classmethod
    def empty(cls, stream: str) -> StreamStats:
        """A stream with nothing read."""
        return cls(stream)

    @classmethod
    def of_segment(cls, segment: SegmentStats) -> StreamStats:
        """The statistics of a stream made of this one segment."""
        if segment.vanished:
            return cls(segment.stream, vanished=(segment.name,))
        corrupt = (
            ()
            if segment.corrupt is None
            else (
                CorruptReport(
                    segment.stream, segment.name, segment.corrupt.position, segment.corrupt.reason
                ),
            )
        )
        return cls(
            segment.stream,
            records=segment.records,
            min_event_ms=segment.min_event_ms,
            max_event_ms=segment.max_event_ms,
            min_ingest_ms=segment.min_ingest_ms,
            max_ingest_ms=segment.max_ingest_ms,
            segments=1,
            corrupt=corrupt,
        )

    def merge(self, other: StreamStats) -> StreamStats:
        """Both together (same stream)."""
        if other.stream != self.stream:
            raise ValueError(f"cannot merge stream {other.stream!r} into {self.stream!r}")
        return replace(
            self,
            records=self.records + other.records,
            min_event_ms=_min(self.min_event_ms, other.min_event_ms),
            max_event_ms=_max(self.max_event_ms, other.max_event_ms),
            min_ingest_ms=_min(self.min_ingest_ms, other.min_ingest_ms),
            max_ingest_ms=_max(self.max_ingest_ms, other.max_ingest_ms),
            segments=self.segments + other.segments,
            corrupt=tuple(sorted((*self.corrupt, *other.corrupt), key=_corrupt_order)),
            vanished=tuple(sorted((*self.vanished, *other.vanished))),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (corrupt entries as a count; the report lists them)."""
        return {
            "records": self.records,
            "min_event_ms": self.min_event_ms,
            "max_event_ms": self.max_event_ms,
            "min_ingest_ms": self.min_ingest_ms,
            "max_ingest_ms": self.max_ingest_ms,
            "segments": self.segments,
            "corrupt": len(self.corrupt),
            "vanished": list(self.vanished),
        }


# ---------------------------------------------------------------------------
# Driver: which files to read
# ---------------------------------------------------------------------------


def list_streams(log_dir: Path) -> list[str]:
    """The stream directories of ``log_dir``: subdirectories holding a segment file, sorted."""
    if not log_dir.is_dir():
        raise LogDirError(f"no log directory {str(log_dir)!r}")
    streams = []
    for entry in os.scandir(log_dir):
        if entry.is_dir() and any(SEGMENT_NAME.fullmatch(name) for name in os.listdir(entry.path)):
            streams.append(entry.name)
    return sorted(streams)


def list_stream_segments(stream_dir: Path, stream: str) -> list[SegmentFile]:
    """Every segment file of one stream directory, oldest first, each marked sealed or not.

    A segment is sealed when its ``.idx`` exists or another segment follows it
    (only the last segment may be active).
    """
    names = set(os.listdir(stream_dir))
    bases = sorted(int(match.group(1)) for name in names if (match := SEGMENT_NAME.fullmatch(name)))
    files = []
    for number, base in enumerate(bases):
        sealed = f"segment-{base:020d}.idx" in names or number < len(bases) - 1
        path = str(stream_dir / f"segment-{base:020d}.log")
        files.append(SegmentFile(stream, path, base, sealed))
    return files


def list_segments(
    log_dir: Path, streams: Sequence[str] | None = None, *, include_active: bool = False
) -> tuple[list[str], list[SegmentFile]]:
    """The streams to report on and the segment files to read.

    ``streams`` None means every stream directory of ``log_dir``. Only sealed
    segments unless ``include_active``. Raises :class:`LogDirError` for a
    missing log directory, an invalid stream name or a missing stream
    directory.
    """
    if not log_dir.is_dir():
        raise LogDirError(f"no log directory {str(log_dir)!r}")
    if streams is None:
        chosen = list_streams(log_dir)
    else:
        chosen = list(dict.fromkeys(streams))
        for stream in chosen:
            if not stream or "/" in stream or stream in (".", ".."):
                raise LogDirError(f"{stream!r} is not a stream name")
            if not (log_dir / stream).is_dir():
                raise LogDirError(f"no stream {stream!r}: {str(log_dir / stream)!r} does not exist")
    files = []
    for stream in chosen:
        for segment in list_stream_segments(log_dir / stream, stream):
            if segment.sealed or include_active:
                files.append(segment)
    return chosen, files


# ---------------------------------------------------------------------------
# Driver: merging
# ---------------------------------------------------------------------------


def merge_streams(
    streams: Iterable[str], segments: Iterable[SegmentStats]
) -> dict[str, StreamStats]:
    """One :class:`StreamStats` per stream (every one of ``streams``, read or not), sorted by name.

    Raises ``ValueError`` for a segment of a stream not in ``streams``.
    """
    merged = {stream: StreamStats.empty(stream) for stream in streams}
    for segment in segments:
        if segment.stream not in merged:
            raise ValueError(f"segment {segment.path!r} belongs to no listed stream")
        merged[segment.stream] = merged[segment.stream].merge(StreamStats.of_segment(segment))
    return dict(sorted(merged.items()))


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _corrupt_order(report: CorruptReport) -> tuple[str, str, int]:
    return (report.stream, report.segment, report.position)
