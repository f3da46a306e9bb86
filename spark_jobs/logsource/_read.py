"""Reading one segment on an executor: Arrow record batches of its rows.

:func:`read_partition` scans the file with :func:`injector.log.scan_segment`
and builds the columns of ``BATCH_ROWS`` records at a time into a
``pyarrow.RecordBatch`` (Spark takes those as they are; tuples would go
through a per-value conversion in Python). A corrupt entry, or a segment
that vanished before its task opened it, becomes one row of its own (or
the task's error, with ``corrupt=fail``) and one WARNING log line.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from injector.log import CorruptEntry, LogRecord, scan_segment
from spark_jobs.logsource._plan import SegmentPartition
from spark_jobs.logsource._pushdown import CORRUPT, RECORD, VANISHED_ROW, Bounds, Pushdown
from spark_jobs.logsource._schema import ARROW_SCHEMA, VANISHED

BATCH_ROWS = 10_000
"""Records per Arrow batch."""

_log = logging.getLogger("spark_jobs.logsource")


class CorruptSegmentError(Exception):
    """A segment could not be read whole (``corrupt=fail``): restore it from a replica or backup.

    ``reason`` is ``vanished`` (with ``position`` None) for a segment file
    deleted after the read was planned.
    """

    def __init__(self, stream: str, segment: str, position: int | None, reason: str) -> None:
        if position is None:
            message = f"stream {stream!r} segment {segment}: {reason} (deleted after planning)"
        else:
            message = (
                f"corrupt entry in stream {stream!r} segment {segment} at byte {position}: {reason}"
            )
        super().__init__(f"millrace log: {message}")
        self.stream = stream
        self.segment = segment
        self.position = position
        self.reason = reason


def read_partition(
    partition: SegmentPartition,
    pushdown: Pushdown,
    *,
    fail_on_corrupt: bool = False,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The rows of one segment that pass ``pushdown``, as batches of :data:`ARROW_SCHEMA`.

    Records come in offset order, then the corrupt entry that ended the scan
    if any. With ``fail_on_corrupt`` a corrupt entry (or a vanished file)
    raises :class:`CorruptSegmentError` instead. Once the offsets pass the
    pushed-down upper bound the scan stops: what follows is never read.
    """
    try:
        source, size = _open(partition)
    except FileNotFoundError:
        yield from _problem(partition, pushdown, None, VANISHED, fail_on_corrupt)
        return
    with source:
        found: list[CorruptEntry] = []
        items = scan_segment(source, partition.stream)
        complete = True
        for chunk in _chunks(items, pushdown, batch_rows, found):
            if chunk is None:
                complete = False  # past the offsets asked for: the rest is never read
                break
            batch = _batch(partition, chunk, pushdown)
            if batch.num_rows:
                yield batch
    corrupt = found[0] if found else None
    if corrupt is None and complete:
        corrupt = _length_check(partition, size)
    if corrupt is not None:
        yield from _problem(partition, pushdown, corrupt.position, corrupt.reason, fail_on_corrupt)


def _chunks(
    items: Iterator[LogRecord | CorruptEntry],
    pushdown: Pushdown,
    size: int,
    found: list[CorruptEntry],
) -> Iterator[list[LogRecord] | None]:
    """The records of ``items`` within the offset bounds, ``size`` at a time.

    A corrupt entry ends them and goes to ``found``. Records come in offset
    order, so the first one past the upper bound ends them too, with a
    final None. Without record rows wanted, ``items`` are only checked.
    """
    low, high = pushdown.offset.low, pushdown.offset.high
    wanted = RECORD in pushdown.kinds
    chunk: list[LogRecord] = []
    add = chunk.append
    for item in items:
        if type(item) is not LogRecord:
            assert isinstance(item, CorruptEntry)
            found.append(item)
            break
        if not wanted:
            continue
        if low is not None or high is not None:
            if low is not None and item.offset < low:
                continue
            if high is not None and item.offset > high:
                if chunk:
                    yield chunk
                yield None
                return
        add(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
            add = chunk.append
    if chunk:
        yield chunk


def _batch(
    partition: SegmentPartition, chunk: list[LogRecord], pushdown: Pushdown
) -> pa.RecordBatch:
    """``chunk`` as one batch, less the records outside the event-time bounds or offset set."""
    rows = len(chunk)
    offsets = pa.array([r.offset for r in chunk], pa.int64())
    events = pa.array([r.event_time_ms for r in chunk], pa.int64())
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([r.record_id for r in chunk], pa.binary()),
            pa.array([r.key for r in chunk], pa.binary()),
            pa.array([r.value for r in chunk], pa.binary()),
            events,
            pa.array([r.ingest_time_ms for r in chunk], pa.int64()),
            _repeat(partition.stream, rows),
            offsets,
            _repeat(partition.name, rows),
            pa.nulls(rows, pa.int64()),
            pa.nulls(rows, pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )
    mask = _mask(events, pushdown.event_time)
    if pushdown.offset.values is not None:
        in_set = pc.is_in(offsets, value_set=pa.array(sorted(pushdown.offset.values), pa.int64()))
        mask = in_set if mask is None else pc.and_(mask, in_set)
    return batch if mask is None else batch.filter(mask)


def _mask(column: pa.Array, bounds: Bounds) -> pa.Array | None:
    """Where ``column`` is within ``bounds``; None when every value is."""
    mask = None
    for test, limit in ((pc.greater_equal, bounds.low), (pc.less_equal, bounds.high)):
        if limit is not None:
            passed = test(column, pa.scalar(limit, pa.int64()))
            mask = passed if mask is None else pc.and_(mask, passed)
    if bounds.values is not None:
        passed = pc.is_in(column, value_set=pa.array(sorted(bounds.values), pa.int64()))
        mask = passed if mask is None else pc.and_(mask, passed)
    return mask


def _repeat(text: str, rows: int) -> pa.Array:
    return pa.repeat(pa.scalar(text, pa.string()), rows)


def _open(partition: SegmentPartition) -> tuple[BinaryIO, int]:
    """The segment file, open for reading, and its size; FileNotFoundError if it is gone."""
    if not partition.archived:
        f = open(partition.location, "rb")  # noqa: SIM115 (closed by the caller)
        return f, os.fstat(f.fileno()).st_size
    fs, path = pafs.FileSystem.from_uri(partition.location)
    with fs.open_input_file(path) as remote:
        data: bytes = remote.read()  # one request for the whole file (on S3: one GET)
    return io.BytesIO(data), len(data)


def _length_check(partition: SegmentPartition, size: int) -> CorruptEntry | None:
    """A corrupt entry if a whole, clean scan did not end where the summary says the file does.

    Catches a segment cut (or extended) exactly at an entry boundary, which
    every entry's own crc misses.
    """
    summary = partition.summary
    if summary is None or summary.size_bytes == size:
        return None
    return CorruptEntry(
        position=min(size, summary.size_bytes),
        reason=f"segment has {size} bytes but its {summary.source} says {summary.size_bytes}",
    )


def _problem(
    partition: SegmentPartition,
    pushdown: Pushdown,
    position: int | None,
    reason: str,
    fail: bool,
) -> Iterator[pa.RecordBatch]:
    """Log a corrupt entry or vanished segment, then raise or yield its row (if it can pass)."""
    _log.warning(
        "millrace log: %s stream=%s segment=%s position=%s reason=%s",
        "vanished segment" if position is None else "corrupt entry",
        partition.stream,
        partition.name,
        "none" if position is None else position,
        reason,
    )
    if fail:
        raise CorruptSegmentError(partition.stream, partition.name, position, reason)
    kind = VANISHED_ROW if position is None else CORRUPT
    if kind not in pushdown.kinds:
        return
    yield pa.RecordBatch.from_arrays(
        [
            *(pa.nulls(1, ARROW_SCHEMA.field(i).type) for i in range(5)),
            pa.array([partition.stream], pa.string()),
            pa.nulls(1, pa.int64()),
            pa.array([partition.name], pa.string()),
            pa.array([position], pa.int64()),
            pa.array([reason], pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )
