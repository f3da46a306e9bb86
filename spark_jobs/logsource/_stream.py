"""Following the live log: ``spark.readStream.format("millrace")`` (Structured Streaming).

Spark keeps the stream reader of a query in a Python process on the driver
and calls it once per micro-batch: :meth:`MillraceStreamReader.latestOffset`
(the committed end of every stream now), then
:meth:`~MillraceStreamReader.partitions` for the offsets between the end of
the last micro-batch and it; the executors call
:meth:`~MillraceStreamReader.read` once per partition, on a pickled copy of
the reader. An offset is ``{"offsets": {stream: next_offset}}``: the next
offset to read of every stream followed. Spark's checkpoint holds them; the
log's records never change, so a micro-batch replayed after a failure reads
the same rows again.

The committed end of a local log's active segment is what
``StreamLog.open(read_only=True)`` recovers: the records of every request
whose COMMIT is written; a request being written past it is never read,
and its torn tail is not a corrupt entry (see :func:`read_range`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from millrace.injector.log import StreamLog
from millrace.spark_jobs._log_reader import LogDirError, list_streams
from millrace.spark_jobs.logsource._archive import is_uri, list_archive, read_manifests
from millrace.spark_jobs.logsource._bulk_scan import ScanOutcome, record_batches
from millrace.spark_jobs.logsource._plan import SegmentPartition, plan_segments
from millrace.spark_jobs.logsource._pushdown import RECORD, Bounds, Pushdown
from millrace.spark_jobs.logsource._read import BATCH_ROWS, _length_check, _open, _problem
from millrace.spark_jobs.logsource._schema import VANISHED
from millrace.spark_jobs.logsource._summary import ManifestError, decode_manifest

_log = logging.getLogger("millrace.spark_jobs.logsource")

_OPEN_ATTEMPTS = 5
"""Tries at opening a local stream while retention or a roll changes its files."""


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """The options of a streaming read, checked (on top of those of a batch read).

    ``starting`` is ``earliest``, ``latest`` or stream -> first offset to read
    (streams not named start at their earliest offset).
    """

    starting: str | Mapping[str, int] = "earliest"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        """From Spark's options; ``ValueError`` for a bad ``startingOffsets``."""
        raw = str(options.get("startingOffsets", "earliest")).strip()
        if raw.lower() in ("earliest", "latest"):
            return cls(raw.lower())
        try:
            given = json.loads(raw)
        except ValueError:
            given = None
        if not (
            isinstance(given, dict)
            and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in given.values()
            )
        ):
            raise ValueError(
                f"option startingOffsets={raw!r}: use earliest, latest or a JSON object "
                'of stream -> offset, e.g. {"clicks": 120}'
            )
        return cls({str(k): int(v) for k, v in given.items()})


@dataclass(frozen=True)
class StreamPartition(InputPartition):
    """Offsets ``[low, high)`` of one segment file: one task of a micro-batch.

    Plain values only (Spark pickles partitions to the executors). Every
    offset of the range was committed when the micro-batch was planned.
    ``to_end`` is True if the range ends where the segment does (known for
    a sealed segment only).
    """

    segment: SegmentPartition
    low: int
    high: int
    to_end: bool = False


class MillraceStreamReader(DataSourceStreamReader):
    """The micro-batches of a streaming read of the log (:mod:`spark_jobs.logsource._stream`).

    ``location`` and ``streams`` as for a batch read; ``streams`` None means
    every stream there when the query starts.
    """

    def __init__(
        self,
        location: str,
        streams: Sequence[str] | None,
        *,
        fail_on_corrupt: bool = False,
        starting: str | Mapping[str, int] = "earliest",
    ) -> None:
        self.location = location
        self.fail_on_corrupt = fail_on_corrupt
        self.starting = starting
        if streams is None:
            streams = _all_streams(location)
        self.streams: tuple[str, ...] = tuple(dict.fromkeys(streams))

    # -- offsets (driver) ------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        """Where a new query starts: each stream's first offset, its end (``latest``) or given."""
        bounds = _bounds(self.location, self.streams)
        if self.starting == "latest":
            return _offset({stream: end for stream, (_, end) in bounds.items()})
        chosen = {} if isinstance(self.starting, str) else self.starting
        return _offset({stream: chosen.get(stream, first) for stream, (first, _) in bounds.items()})

    def latestOffset(  # noqa: N802 (Spark's name)
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """The committed end of every stream now (never below ``start``).

        ``limit`` is Spark's read limit: always "all available" here (the
        source sets no other); with ``Trigger.AvailableNow`` Spark itself
        keeps the end it saw first.
        """
        ends = {stream: end for stream, (_, end) in _bounds(self.location, self.streams).items()}
        if start is not None:
            for stream, offset in _offsets(start).items():
                if stream in ends:
                    ends[stream] = max(ends[stream], offset)
        return _offset(ends)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Per stream, a :class:`StreamPartition` per segment with offsets of ``[start, end)``."""
        starts, ends = _offsets(start), _offsets(end)
        parts: list[InputPartition] = []
        for stream, high in ends.items():
            low = starts.get(stream, 0)
            if low < high:
                parts.extend(_plan_range(self.location, stream, low, high))
        return parts

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the log keeps its records by its own retention, not by readers.

        A query that falls behind retention loses the deleted records (a
        WARNING when a micro-batch is planned) and goes on with the oldest left.
        """

    # -- reading (executors) ---------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one partition: Arrow batches of :data:`ARROW_SCHEMA`."""
        if not isinstance(partition, StreamPartition):
            return iter(())
        return read_range(partition, fail_on_corrupt=self.fail_on_corrupt)


def read_range(
    partition: StreamPartition, *, fail_on_corrupt: bool = False, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The records ``[low, high)`` of the partition's segment, then its corrupt entry if any.

    A corrupt entry counts only if it cuts records of the range off or, in a
    sealed segment, the range reaches the segment's end. Past the range, in
    the active segment, it is the tail of a request still being written (or
    a problem for the micro-batch that reads that far).
    """
    segment = partition.segment
    pushdown = Pushdown(offset=Bounds(partition.low, partition.high - 1))
    try:
        source, size = _open(segment)
    except FileNotFoundError:
        yield from _problem(segment, pushdown, None, VANISHED, fail_on_corrupt)
        return
    outcome = ScanOutcome()
    last = partition.low - 1
    with source:
        for batch in record_batches(
            source,
            segment.stream,
            segment.name,
            pushdown,
            batch_rows=batch_rows,
            outcome=outcome,
        ):
            last = batch.column(6)[-1].as_py()
            yield batch
    whole = last >= partition.high - 1
    corrupt = outcome.corrupt
    if whole and not (segment.sealed and partition.to_end):
        corrupt = None
    if corrupt is None and whole and partition.to_end and outcome.complete:
        corrupt = _length_check(segment, size)
    if corrupt is None and not whole:
        reason = f"the segment ends before offset {last + 1} (committed up to {partition.high})"
        yield from _problem(segment, pushdown, size, reason, fail_on_corrupt)
        return
    if corrupt is not None:
        yield from _problem(segment, pushdown, corrupt.position, corrupt.reason, fail_on_corrupt)


def _plan_range(location: str, stream: str, low: int, high: int) -> list[StreamPartition]:
    """The partitions of offsets ``[low, high)`` of ``stream``: one per segment holding some."""
    planning = Pushdown(
        streams=frozenset((stream,)),
        offset=Bounds(low, high - 1),
        kinds=frozenset((RECORD,)),
    )
    _, segments = plan_segments(location, [stream], include_active=True, pushdown=planning)
    segments.sort(key=lambda part: part.base_offset)
    if not segments or segments[0].base_offset > low:
        first = segments[0].base_offset if segments else high
        _log.warning(
            "millrace stream read: stream=%s offsets %d..%d are gone (retention) before being read",
            stream,
            low,
            min(first, high) - 1,
        )
    parts = []
    for number, segment in enumerate(segments):
        end: int | None = None
        if number + 1 < len(segments):
            end = segments[number + 1].base_offset
        elif segment.summary is not None:
            end = segment.summary.end_offset
        part_low = max(low, segment.base_offset)
        part_high = high if end is None else min(high, end)
        if part_low < part_high:
            to_end = end is not None and part_high == end
            parts.append(StreamPartition(segment, part_low, part_high, to_end))
    return parts


def _all_streams(location: str) -> list[str]:
    if is_uri(location):
        _, chosen, _ = list_archive(location, None)
        return chosen
    return list_streams(Path(location))


def _bounds(location: str, streams: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Stream -> (first offset held, committed end)."""
    if is_uri(location):
        return _archive_bounds(location, streams)
    return {stream: _local_bounds(Path(location) / stream, stream) for stream in streams}


def _local_bounds(directory: Path, stream: str) -> tuple[int, int]:
    """What a read-only open of the stream recovers: its first offset and committed end."""
    if not directory.is_dir():
        return 0, 0  # not created yet: it starts at offset 0
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            log = StreamLog.open(directory, stream, read_only=True)
        except FileNotFoundError:  # retention deleted a segment while it was opened
            if attempt + 1 == _OPEN_ATTEMPTS:
                raise
            time.sleep(0.05)
            continue
        try:
            return log.first_offset, log.next_offset
        finally:
            log.close()
    raise AssertionError("unreachable")


def _archive_bounds(uri: str, streams: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Per stream, the first archived offset and the end of the last archived segment."""
    fs, _, listed = list_archive(uri, list(streams))
    bounds = {}
    for stream in streams:
        segments = listed.get(stream, [])
        first = segments[0].base_offset if segments else 0
        end = first
        for segment in reversed(segments):
            (data,) = read_manifests(fs, [segment])
            if data is None:
                continue
            try:
                end = decode_manifest(data, stream, segment.base_offset).end_offset
            except ManifestError as error:
                raise LogDirError(
                    f"log archive {uri!r}: the manifest entry of stream {stream!r} segment "
                    f"{segment.base_offset} is invalid ({error})"
                ) from error
            break
        bounds[stream] = (first, end)
    return bounds


def _offset(offsets: Mapping[str, int]) -> dict[str, Any]:
    return {"offsets": dict(offsets)}


def _offsets(offset: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in dict(offset.get("offsets", {})).items()}
