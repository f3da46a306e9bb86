"""Planning a read on the driver: which segment files, one input partition each.

A local log directory (``docs/log-format.md``) is listed with
:func:`spark_jobs._log_reader.list_segments`; a sealed segment's summary
comes from its ``.idx`` footer. An archive URI is listed through its
manifest entries (:mod:`spark_jobs.logsource._archive`). Segments are pruned
in two steps, cheapest first: by stream, file name and the offsets their
names imply (a segment ends where the next one starts); then, for the
survivors only, by the offsets and event times of their summaries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

import pyarrow.fs as pafs
from pyspark.sql.datasource import InputPartition

from millrace.spark_jobs._log_reader import LogDirError, SegmentFile, list_segments
from millrace.spark_jobs.logsource._archive import (
    ArchivedSegment,
    is_uri,
    list_archive,
    open_archive,
    read_manifests,
)
from millrace.spark_jobs.logsource._pushdown import RECORD, Bounds, Pushdown
from millrace.spark_jobs.logsource._summary import (
    ManifestError,
    SegmentSummary,
    decode_index_footer,
    decode_manifest,
)

_log = logging.getLogger("millrace.spark_jobs.logsource")


@dataclass(frozen=True)
class SegmentPartition(InputPartition):
    """One segment file to read: one Spark input partition, one task.

    Plain values only (Spark pickles partitions to the executors):
    ``location`` is the file's local path or, for an archive, its URI;
    ``summary`` what its index or manifest says it holds (None when there
    is none: an active segment, a lost index).
    """

    stream: str
    location: str
    base_offset: int
    name: str
    sealed: bool
    archived: bool
    summary: SegmentSummary | None = None
    first_byte: int = 0
    end_byte: int | None = None
    """A piece of a segment read as several partitions (``minPartitions``): the
    records whose entries start at file positions ``[first_byte, end_byte)``, and
    the corrupt entry found there (``end_byte`` None: to the end of the file)."""

    @property
    def piece(self) -> Bounds | None:
        """The file positions of the piece's entries (None: the whole segment)."""
        if self.first_byte == 0 and self.end_byte is None:
            return None
        return Bounds(self.first_byte, None if self.end_byte is None else self.end_byte - 1)

    def holds(self, position: int) -> bool:
        """Whether a problem at file ``position`` is this partition's to report."""
        return self.first_byte <= position and (self.end_byte is None or position < self.end_byte)


def check_location(location: str) -> None:
    """:class:`LogDirError` unless ``location`` is a log directory or a log archive."""
    if is_uri(location):
        open_archive(location)
    elif not Path(location).is_dir():
        raise LogDirError(f"no log directory {location!r}")


def plan_segments(
    location: str,
    streams: Sequence[str] | None = None,
    *,
    include_active: bool = False,
    pushdown: Pushdown | None = None,
    min_partitions: int = 1,
) -> tuple[list[str], list[SegmentPartition]]:
    """The streams read and one :class:`SegmentPartition` per segment that can give rows.

    ``location`` is a local log directory or an archive URI. ``streams``
    None means every stream. Only sealed segments unless ``include_active``
    (an archive holds sealed segments only). Segments none of whose rows
    can pass ``pushdown`` are left out. Fewer segments than ``min_partitions``:
    the local ones are cut into pieces (:func:`pieces`). Raises
    :class:`LogDirError` for a missing log directory or archive, a bad stream
    name or a named stream that is not there.
    """
    pushdown = pushdown or Pushdown()
    if is_uri(location):
        chosen, candidates = _archive_candidates(location, streams, pushdown)
    else:
        chosen, candidates = _local_candidates(location, streams, include_active, pushdown)
    if not pushdown.kinds:
        return chosen, []
    kept = [part for part in candidates if _by_summary(pushdown, part.summary)]
    return chosen, pieces(kept, min_partitions)


MIN_PIECE_BYTES = 4 << 20
"""A segment is not cut into pieces smaller than this."""


def pieces(parts: list[SegmentPartition], min_partitions: int) -> list[SegmentPartition]:
    """``parts``, the local segments cut into pieces of about equal bytes when there
    are fewer parts than ``min_partitions`` (as Spark's file sources split files so
    that every core reads): pieces of at least :data:`MIN_PIECE_BYTES`, at most
    ``min_partitions`` in all. Each piece's task scans its segment from the start
    (the entries are checked in order) but makes rows of its own records only."""
    if len(parts) >= min_partitions:
        return parts
    sizes = [0 if part.archived else _size(part) for part in parts]
    target = max(MIN_PIECE_BYTES, sum(sizes) // min_partitions)
    cut: list[SegmentPartition] = []
    for part, size in zip(parts, sizes, strict=True):
        count = min(size // target, min_partitions)
        if count <= 1:
            cut.append(part)
            continue
        starts = [i * size // count for i in range(count)]
        ends: list[int | None] = [*starts[1:], None]
        cut.extend(
            replace(part, first_byte=start, end_byte=end)
            for start, end in zip(starts, ends, strict=True)
        )
    return cut


def _size(part: SegmentPartition) -> int:
    try:
        return os.path.getsize(part.location)
    except OSError:
        return 0  # gone: read whole, where the read reports it


def segment_exists(partition: SegmentPartition) -> bool:
    """Whether the segment file is (still) there."""
    if not partition.archived:
        return os.path.exists(partition.location)
    fs, path = pafs.FileSystem.from_uri(partition.location)
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def _by_name(pushdown: Pushdown, stream: str, name: str, base: int, end: int | None) -> bool:
    """Whether a segment may give rows, by its stream, its name and the next segment's base."""
    if not pushdown.keeps_segment(stream, name):
        return False
    if pushdown.kinds <= {RECORD}:
        return pushdown.keeps_offsets(base, end)
    return True


def _by_summary(pushdown: Pushdown, summary: SegmentSummary | None) -> bool:
    """Whether a segment with this summary may give rows (None: nothing known, so it may)."""
    if summary is None:
        return True
    if pushdown.kinds <= {RECORD} and not summary.records:
        return False
    return pushdown.keeps_offsets(summary.base_offset, summary.end_offset) and (
        pushdown.keeps_event_times(
            summary.records, summary.min_event_ms or 0, summary.max_event_ms or 0
        )
    )


def _local_candidates(
    location: str, streams: Sequence[str] | None, include_active: bool, pushdown: Pushdown
) -> tuple[list[str], list[SegmentPartition]]:
    chosen, files = list_segments(Path(location), streams, include_active=True)
    nexts: dict[str, int | None] = {}
    for before, after in pairwise(files):
        if before.stream == after.stream:
            nexts[before.path] = after.base_offset
    parts = []
    for file in files:
        if not (file.sealed or include_active):
            continue
        if not _by_name(pushdown, file.stream, file.name, file.base_offset, nexts.get(file.path)):
            continue
        parts.append(
            SegmentPartition(
                stream=file.stream,
                location=file.path,
                base_offset=file.base_offset,
                name=file.name,
                sealed=file.sealed,
                archived=False,
                summary=_index_summary(file),
            )
        )
    return chosen, parts


def _index_summary(file: SegmentFile) -> SegmentSummary | None:
    if not file.sealed:
        return None
    try:
        data = Path(file.path).with_suffix(".idx").read_bytes()
    except FileNotFoundError:
        return None  # a lost index: the writer rebuilds it; read the segment without one
    return decode_index_footer(data, file.base_offset)


def _archive_candidates(
    location: str, streams: Sequence[str] | None, pushdown: Pushdown
) -> tuple[list[str], list[SegmentPartition]]:
    fs, chosen, listed = list_archive(location, streams, pushdown.keeps_stream)
    candidates: list[ArchivedSegment] = []
    for segments in listed.values():
        ends: list[int | None] = [after.base_offset for after in segments[1:]]
        ends.append(None)
        candidates.extend(
            segment
            for segment, end in zip(segments, ends, strict=True)
            if _by_name(pushdown, segment.stream, _name(segment), segment.base_offset, end)
        )
    parts = []
    for segment, data in zip(candidates, read_manifests(fs, candidates), strict=True):
        if data is None:
            continue  # its manifest entry is gone: no longer in the archive
        try:
            summary: SegmentSummary | None = decode_manifest(
                data, segment.stream, segment.base_offset
            )
        except ManifestError as error:
            _log.warning(
                "millrace log archive: manifest entry of stream=%s segment=%s is invalid (%s); "
                "reading the segment without it",
                segment.stream,
                _name(segment),
                error,
            )
            summary = None
        parts.append(
            SegmentPartition(
                stream=segment.stream,
                location=segment.segment_uri,
                base_offset=segment.base_offset,
                name=_name(segment),
                sealed=True,
                archived=True,
                summary=summary,
            )
        )
    return chosen, parts


def _name(segment: ArchivedSegment) -> str:
    return f"segment-{segment.base_offset:020d}.log"
