"""Reading one segment on an executor: Arrow record batches of its rows.

:func:`read_partition` scans the file in bulk
(:mod:`spark_jobs.logsource._bulk_scan`) into Arrow record batches of
``BATCH_ROWS`` records (Spark takes those as they are; tuples would go
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
import pyarrow.fs as pafs

from millrace.injector.log import CorruptEntry
from millrace.spark_jobs.logsource._bulk_scan import ScanOutcome, record_batches
from millrace.spark_jobs.logsource._plan import SegmentPartition
from millrace.spark_jobs.logsource._pushdown import CORRUPT, VANISHED_ROW, Pushdown
from millrace.spark_jobs.logsource._schema import ARROW_SCHEMA, VANISHED

BATCH_ROWS = 10_000
"""Records per Arrow batch."""

_log = logging.getLogger("millrace.spark_jobs.logsource")


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
    if any (of a segment read in pieces, the piece holding its position reports
    it). With ``fail_on_corrupt`` a corrupt entry (or a vanished file) raises
    :class:`CorruptSegmentError` instead. Once the offsets pass the
    pushed-down upper bound the scan stops: what follows is never read.
    """
    try:
        source, size = _open(partition)
    except FileNotFoundError:
        if partition.holds(0):  # one piece of a segment reports it vanished
            yield from _problem(partition, pushdown, None, VANISHED, fail_on_corrupt)
        return
    outcome = ScanOutcome()
    with source:
        yield from record_batches(
            source,
            partition.stream,
            partition.name,
            pushdown,
            batch_rows=batch_rows,
            outcome=outcome,
            piece=partition.piece,
        )
    corrupt = outcome.corrupt
    if corrupt is None and outcome.complete:
        corrupt = _length_check(partition, size)
    if corrupt is not None and partition.holds(corrupt.position):
        yield from _problem(partition, pushdown, corrupt.position, corrupt.reason, fail_on_corrupt)


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
