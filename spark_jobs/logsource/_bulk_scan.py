"""The record rows of one segment as Arrow batches, built without a Python object per record.

:func:`record_batches` reads the segment with
:func:`injector.log.scan_segment_columns` (numpy columns of the committed
records of a few MiB of the file at a time), keeps the records that pass the
pushed-down offset and event-time bounds with numpy, and builds the Arrow
columns over the file's own bytes: keys and values are gathered out of it by
Arrow's ``take``, record ids are the stream's tag and the big-endian offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from millrace.injector.log import CorruptEntry, RecordColumns, scan_segment_columns, stream_tag
from millrace.spark_jobs.logsource._pushdown import RECORD, Bounds, Pushdown
from millrace.spark_jobs.logsource._schema import ARROW_SCHEMA

Int64s = NDArray[np.int64]

_INT32_DATA = 1 << 31
"""Data buffers smaller than this take 32-bit Arrow offsets."""


@dataclass
class ScanOutcome:
    """How the scan :func:`record_batches` ran ended: set once its batches are consumed."""

    corrupt: CorruptEntry | None = None
    """The corrupt entry that ended the scan, if any."""
    complete: bool = True
    """False if the scan stopped early, past the highest offset asked for."""


def record_batches(
    source: BinaryIO,
    stream: str,
    segment: str,
    pushdown: Pushdown,
    *,
    batch_rows: int,
    outcome: ScanOutcome,
    piece: Bounds | None = None,
) -> Iterator[pa.RecordBatch]:
    """The record rows of one segment file that pass ``pushdown``, ``batch_rows`` per batch.

    Rows of :data:`ARROW_SCHEMA`, in offset order; every batch but the last
    holds ``batch_rows`` rows. The corrupt entry that ends the scan (with the
    records before it given) goes to ``outcome``. Records come in offset
    order, so once they pass the upper offset bound the scan stops there and
    the rest of the file is never read. Without record rows wanted, the file
    is only checked. ``piece``: only the records whose entries start within
    these file positions (a segment read as several partitions); the file is
    still checked from its start, and the scan stops past them.
    """
    wanted = RECORD in pushdown.kinds
    high = pushdown.offset.high
    last_byte = None if piece is None else piece.high
    tag = stream_tag(stream)
    rebatch = _Rebatcher(batch_rows)
    for item in scan_segment_columns(source):
        if isinstance(item, CorruptEntry):
            outcome.corrupt = item
            break
        if not wanted:
            continue
        positions = None if piece is None else item.entry_positions()
        batch = _batch(item, _kept(item, pushdown, positions, piece), tag, stream, segment)
        if batch is not None:
            yield from rebatch.add(batch)
        if (high is not None and item.offset[-1] > high) or (
            positions is not None and last_byte is not None and positions[-1] > last_byte
        ):
            outcome.complete = False
            break
    yield from rebatch.flush()


def _kept(
    columns: RecordColumns,
    pushdown: Pushdown,
    positions: Int64s | None = None,
    piece: Bounds | None = None,
) -> Int64s | None:
    """The indices of the records within the offset and event-time bounds (and, given
    their entries' ``positions``, the ``piece``'s); None for all."""
    mask = None
    if positions is not None and piece is not None:
        mask = _within(positions, piece)
    for values, bounds in (
        (columns.offset, pushdown.offset),
        (columns.event_time_ms, pushdown.event_time),
    ):
        within = _within(values, bounds)
        if within is not None:
            mask = within if mask is None else mask & within
    return None if mask is None else np.flatnonzero(mask)


def _within(values: Int64s, bounds: Bounds) -> NDArray[np.bool_] | None:
    if bounds.unbounded:
        return None
    mask = np.ones(len(values), np.bool_)
    if bounds.low is not None:
        mask &= values >= bounds.low
    if bounds.high is not None:
        mask &= values <= bounds.high
    if bounds.values is not None:
        allowed = [v for v in bounds.values if -(1 << 63) <= v < 1 << 63]
        mask &= np.isin(values, np.array(allowed, np.int64))
    return mask


def _batch(
    columns: RecordColumns, kept: Int64s | None, tag: bytes, stream: str, segment: str
) -> pa.RecordBatch | None:
    """The rows of ``columns`` (only those at ``kept`` if given); None if there are none."""
    offsets, events, ingests = columns.offset, columns.event_time_ms, columns.ingest_time_ms
    key_start, key_end, value_end = columns.key_start, columns.key_end, columns.value_end
    if kept is not None:
        offsets, events, ingests = offsets[kept], events[kept], ingests[kept]
        key_start, key_end, value_end = key_start[kept], key_end[kept], value_end[kept]
    rows = len(offsets)
    if not rows:
        return None
    data = pa.py_buffer(columns.data)
    return pa.RecordBatch.from_arrays(
        [
            _record_ids(tag, offsets),
            _slices(data, key_start, key_end),
            _slices(data, key_end, value_end),
            pa.array(events, pa.int64()),
            pa.array(ingests, pa.int64()),
            _repeat(stream, rows),
            pa.array(offsets, pa.int64()),
            _repeat(segment, rows),
            pa.nulls(rows, pa.int64()),
            pa.nulls(rows, pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )


def _record_ids(tag: bytes, offsets: Int64s) -> pa.Array:
    """``tag`` + the big-endian offset: 16 bytes per record."""
    rows = len(offsets)
    ids = np.empty((rows, 16), np.uint8)
    ids[:, :8] = np.frombuffer(tag, np.uint8)
    ids[:, 8:] = offsets.astype(">u8").view(np.uint8).reshape(rows, 8)
    bounds = np.arange(0, 16 * rows + 1, 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(bounds), pa.py_buffer(ids)])


def _slices(data: pa.Buffer, starts: Int64s, ends: Int64s) -> pa.Array:
    """``data[starts[i]:ends[i]]`` for every i, as one binary array (the slices come in order).

    Over ``data`` as it is, they are the even elements of a binary array whose
    odd elements are the bytes between them; ``take`` copies the even ones out.
    """
    rows = len(starts)
    small = data.size < _INT32_DATA
    bounds = np.empty(2 * rows, np.int32 if small else np.int64)
    bounds[0::2] = starts
    bounds[1::2] = ends
    kind = pa.binary() if small else pa.large_binary()
    spread = pa.Array.from_buffers(kind, 2 * rows - 1, [None, pa.py_buffer(bounds), data])
    gathered = spread.take(pa.array(np.arange(0, 2 * rows, 2)))
    return gathered if small else gathered.cast(pa.binary())


def _repeat(text: str, rows: int) -> pa.Array:
    return pa.repeat(pa.scalar(text, pa.string()), rows)


class _Rebatcher:
    """Cuts and joins batches into batches of ``rows`` rows (slices where it can)."""

    def __init__(self, rows: int) -> None:
        self._rows = max(rows, 1)
        self._pending: list[pa.RecordBatch] = []
        self._count = 0

    def add(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        at = 0
        while at < batch.num_rows:
            part = min(self._rows - self._count, batch.num_rows - at)
            self._pending.append(batch.slice(at, part))
            self._count += part
            at += part
            if self._count == self._rows:
                yield self._take()

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self._count:
            yield self._take()

    def _take(self) -> pa.RecordBatch:
        pending, self._pending, self._count = self._pending, [], 0
        return pending[0] if len(pending) == 1 else pa.concat_batches(pending)
