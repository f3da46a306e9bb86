"""``ParquetSink``: a sink stream committed as Parquet part files, each record exactly once.

A directory of ``part-<seq:010d>.parquet`` files, ``seq`` strictly increasing.
Per group of delivery batches (every batch a ``Deliver`` stream queued while the
previous group was being written): drop ids already written, then

1. write the new records as ``.part-<seq>.parquet.tmp`` (hidden: pyarrow and Spark
   skip dot-files when reading the directory) and fsync it,
2. rename it to ``part-<seq>.parquet`` and fsync the directory,
3. ack every batch of the group.

A part file therefore exists whole or not at all. After step 2, its record ids,
keys and positions are indexed (``.NAME.index`` beside the directory,
:mod:`sinks._sink_index`: on disk, memory bounded). On open, leftover ``*.tmp``
files (a crash before step 2) are deleted and the ``record_id`` and ``key``
columns of the parts the index does not cover yet are read back and indexed, so
a record resent after a crash is acknowledged as a duplicate and never written
twice. Memory holds one small entry per part file. Small files are the price of
acking each group; nothing compacts them.
"""

from __future__ import annotations

import os
import re
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pyarrow.parquet as pq

from millrace.deployment import abort, fsync_directory
from millrace.engine import sender_progress
from millrace.sinks._indexed_sink import IndexedSink, SinkUnavailableError, lock_beside
from millrace.statestore import StoreConfig
from millrace.wire.v1 import delivery_pb2, record_pb2

SCHEMA = pa.schema(
    [
        ("record_id", pa.binary()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("event_time_ms", pa.int64()),
        ("producer", pa.string()),
        ("stream", pa.string()),
    ]
)
"""The columns of every part file: the fields of the delivered ``Record``."""

MAX_GROUP = 64
"""At most this many queued batches of one ``Deliver`` stream go into one part file."""

_PART = re.compile(r"part-(\d{10})\.parquet")


def _part_name(seq: int) -> str:
    return f"part-{seq:010d}.parquet"


def _numbered_parts(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    named = [(_PART.fullmatch(p.name), p) for p in directory.iterdir()]
    return sorted((int(m[1]), p) for m, p in named if m)


def committed_parts(directory: str | Path) -> list[Path]:
    """The committed part files of a sink directory, in commit order (``*.tmp`` excluded)."""
    return [path for _, path in _numbered_parts(Path(directory))]


def read_parquet_sink(directory: str | Path) -> pa.Table:
    """Every committed record of a sink directory, in commit order."""
    tables = [pq.read_table(p, schema=SCHEMA) for p in committed_parts(directory)]
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


@dataclass(frozen=True)
class _Part:
    seq: int
    first: int  # position of its first row
    rows: int


class ParquetSink(IndexedSink):
    """Serve with ``delivery_pb2_grpc.add_DeliveryServicer_to_server``.

    Writers are serialized by a commit lock; readers (``read``, ``latest``)
    only wait for the index update after a part is durable, never for a write.
    """

    def __init__(self, directory: str | Path, *, index_config: StoreConfig | None = None) -> None:
        """``index_config``: the settings of its index's store (see ``FileSink``)."""
        self.directory = Path(directory)
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True)
            fsync_directory(self.directory.parent)
        self._lock_fd = lock_beside(self.directory)
        super().__init__(self.directory.with_name(f".{self.directory.name}.index"), index_config)
        self._commit_lock = threading.Lock()  # one writer at a time
        self._parts: list[_Part] = []
        self._firsts: list[int] = []  # _parts[i].first, for bisecting positions
        self._count = 0
        self._cached: tuple[int, pa.Table] | None = None  # the part read last
        try:
            self.removed_tmp_files = self._recover()
        except BaseException:
            self._index.close()
            os.close(self._lock_fd)
            raise
        self._next_seq = self._parts[-1].seq + 1 if self._parts else 0

    def _recover(self) -> int:
        leftovers = list(self.directory.glob("*.tmp"))  # dot-files included
        for path in leftovers:
            path.unlink()
        if leftovers:
            fsync_directory(self.directory)
        parts = _numbered_parts(self.directory)
        self._index.check_output(
            parts[-1][0] + 1 if parts else 0, f"the sink directory {self.directory}"
        )
        for seq, path in parts:
            if seq < self._index.end:
                self._add_part(seq, pq.read_metadata(path).num_rows)
            else:
                self._index_part(seq, path)
        return len(leftovers)

    def _index_part(self, seq: int, path: Path) -> None:
        """Index a committed part the index does not cover yet."""
        columns = pq.read_table(path, columns=["record_id", "key"])
        ids, keys = columns.column("record_id").to_pylist(), columns.column("key").to_pylist()
        self._index.add(ids, keys, None, seq + 1)
        self._add_part(seq, len(ids))

    def _add_part(self, seq: int, rows: int) -> None:
        self._parts.append(_Part(seq, self._count, rows))
        self._firsts.append(self._count)
        self._count += rows

    def Deliver(  # noqa: N802 - the rpc's name
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for group in _ReadAhead(request_iterator, MAX_GROUP).groups():
            try:
                acks = self.write_group(group)
            except SinkUnavailableError as exc:
                abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))
                return
            yield from acks

    def write(self, batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
        """Commit the batch's new records as one part file; the ack lists new and duplicate ids."""
        return self.write_group([batch])[0]

    def write_group(
        self, batches: Iterable[delivery_pb2.DeliveryBatch]
    ) -> list[delivery_pb2.DeliveryAck]:
        """Commit the new records of several batches as one part file, then ack each batch.

        A record whose id is already written, or appears earlier in the group,
        is a duplicate. No file is written when every record is a duplicate.
        """
        batches = list(batches)
        acks: list[delivery_pb2.DeliveryAck] = []
        with self._commit_lock:
            fresh: list[record_pb2.Record] = []
            pending: set[bytes] = set()
            with self._lock:
                self._catch_up()
                for batch in batches:
                    ack, new = self._split(batch, pending)
                    fresh += new
                    acks.append(ack)
            if fresh:
                seq = self._next_seq
                self._next_seq += 1
                try:
                    self._commit_part(seq, fresh)
                except OSError as exc:
                    raise SinkUnavailableError(
                        f"sink directory {self.directory} cannot be written: "
                        f"{exc.strerror or exc}; refusing records until a write succeeds "
                        "(nothing of this batch was kept; resend it)"
                    ) from exc
                marks = [m for b in batches if (m := sender_progress(b)) is not None]
                ids, keys = [r.record_id for r in fresh], [r.key for r in fresh]
                with self._lock:
                    try:
                        self._index.add(ids, keys, None, seq + 1, marks)
                    except Exception as exc:  # the part is durable: indexed by _catch_up
                        raise SinkUnavailableError(
                            f"the index of sink directory {self.directory} cannot be written: "
                            f"{exc}; refusing records until it can"
                        ) from exc
                    self._add_part(seq, len(fresh))
                    self.written += len(fresh)
                    self._grew.notify_all()
            with self._lock:
                self._note_told(batches, acks, written=bool(fresh))
        return acks

    def _catch_up(self) -> None:
        """Under the locks: index a committed part whose indexing failed."""
        for seq in range(self._index.end, self._next_seq):
            path = self.directory / _part_name(seq)
            if path.exists():
                self._index_part(seq, path)

    def _commit_part(self, seq: int, records: list[record_pb2.Record]) -> None:
        """Steps 1 and 2: the part file is durable, under its final name, or absent."""
        final = self.directory / _part_name(seq)
        tmp = final.with_name("." + final.name + ".tmp")
        table = pa.Table.from_pydict(
            {
                "record_id": [r.record_id for r in records],
                "key": [r.key for r in records],
                "value": [r.value for r in records],
                "event_time_ms": [r.event_time_ms for r in records],
                "producer": [r.producer for r in records],
                "stream": [r.stream for r in records],
            },
            schema=SCHEMA,
        )
        try:
            with open(tmp, "wb") as handle:
                pq.write_table(table, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, final)
            fsync_directory(self.directory)
        except BaseException:
            # Not acked, so it will be resent: leave no file that would make it a duplicate.
            tmp.unlink(missing_ok=True)
            final.unlink(missing_ok=True)
            raise

    # -- reading (Subscribe, View) --------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions."""
        with self._lock:
            end = min(self._count, position + limit)
            if position >= end:
                return []
            index = bisect_right(self._firsts, position) - 1
            parts = []
            while index < len(self._parts) and self._parts[index].first < end:
                parts.append(self._parts[index])
                index += 1
        found: list[tuple[int, record_pb2.Record]] = []
        for part in parts:
            low = max(position, part.first) - part.first
            high = min(end, part.first + part.rows) - part.first
            rows = self._table(part.seq).slice(low, high - low).to_pylist()
            found.extend(
                (part.first + low + i, record_pb2.Record(**row)) for i, row in enumerate(rows)
            )
        return found

    def _table(self, seq: int) -> pa.Table:
        cached = self._cached
        if cached is not None and cached[0] == seq:
            return cached[1]
        table = pq.read_table(self.directory / _part_name(seq), schema=SCHEMA)
        self._cached = (seq, table)
        return table

    def close(self) -> None:
        """Close the index and release the directory's lock (no file is held open
        between groups)."""
        with self._commit_lock, self._lock:
            self._index.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


class _ReadAhead:
    """Pulls a ``Deliver`` stream's batches on a thread, so the writer can take, as one
    group, every batch that arrived while it was writing the previous one."""

    def __init__(self, requests: Iterator[delivery_pb2.DeliveryBatch], limit: int) -> None:
        self._limit = limit
        self._changed = threading.Condition()
        self._queued: deque[delivery_pb2.DeliveryBatch] = deque()
        self._ended = False  # the stream is over (or failed)
        self._closed = False  # the writer stopped taking batches
        self._error: Exception | None = None
        threading.Thread(
            target=self._pull, args=(requests,), name="parquet-sink-read-ahead", daemon=True
        ).start()

    def _pull(self, requests: Iterator[delivery_pb2.DeliveryBatch]) -> None:
        try:
            for batch in requests:
                with self._changed:
                    self._changed.wait_for(lambda: len(self._queued) < self._limit or self._closed)
                    if self._closed:
                        return
                    self._queued.append(batch)
                    self._changed.notify_all()
        except Exception as exc:  # a cancelled call, say: raised once the queue is drained
            self._error = exc
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def groups(self) -> Iterator[list[delivery_pb2.DeliveryBatch]]:
        """Every batch queued so far (at least one), until the stream ends."""
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: bool(self._queued) or self._ended)
                    if not self._queued:
                        if self._error is not None:
                            raise self._error
                        return
                    group = list(self._queued)
                    self._queued.clear()
                    self._changed.notify_all()
                yield group
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()
