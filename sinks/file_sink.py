"""``FileSink``: a sink stream appended to a JSON-lines file, each record exactly once.

Per delivery batch: drop ids already written, append one line per new record
(``{"v": 2, "record_id", "key", "value", "event_time_ms", "producer"}``, a JSON value
as JSON: :mod:`millrace.sink_lines`, which also reads the lines of version 1) with
unbuffered writes, fsync,
then index them (``.NAME.index`` beside the file, :mod:`sinks._sink_index`),
then ack. A write or fsync that fails (``ENOSPC``, ``EIO``) is cut back on
the spot to the file's last durable length, nothing of the batch is
acknowledged, and the sink answers ``UNAVAILABLE`` until a write succeeds
again: the sender resends, and nothing is lost or doubled. On start, the part
of the file the index does not cover yet is read back: a torn last line (a
crash mid-write) is truncated, a malformed line is skipped with a warning (never
taken for a record), and the ids of its records are indexed, so a record resent
after a crash is acknowledged as a duplicate and never written twice. Memory
stays bounded however long the file grows: ids, positions and the latest
record per key are on disk.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

import grpc

from millrace.deployment import AppendOnlyFile, abort, line_blocks
from millrace.engine import sender_progress
from millrace.sink_lines import parse_line, sink_line
from millrace.sinks._indexed_sink import IndexedSink, SinkUnavailableError, lock_beside
from millrace.statestore import StoreConfig
from millrace.wire.v1 import delivery_pb2, record_pb2

log = logging.getLogger(__name__)

RECOVER_READ_BYTES = 8 << 20
"""Bytes of the file read at a time when the sink starts."""
READ_BYTES = 1 << 20
"""Bytes of the file read at a time by ``read``."""


def read_sink_file(path: str | Path) -> list[dict[str, Any]]:
    """The record lines of a sink file as JSON objects, as written (version 2: a JSON
    value parsed under ``value``; see :mod:`millrace.sink_lines`); a torn last line and
    malformed lines are ignored."""
    lines = Path(path).read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[:-1] if parse_line(line) is not None]


def read_sink_records(path: str | Path) -> list[record_pb2.Record]:
    """The records of a sink file as the sink received them, in file order (a torn last
    line and malformed lines are ignored)."""
    lines = Path(path).read_bytes().split(b"\n")[:-1]
    return [found.record() for line in lines if (found := parse_line(line)) is not None]


class FileSink(IndexedSink):
    """Serve with ``delivery_pb2_grpc.add_DeliveryServicer_to_server``."""

    def __init__(self, path: str | Path, *, index_config: StoreConfig | None = None) -> None:
        """``index_config``: the settings of its index's store (unsynced: the file is the
        truth; the dedup retention)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_beside(self.path)
        try:
            super().__init__(self.path.with_name(f".{self.path.name}.index"), index_config)
            self.malformed_lines = 0
            try:
                self.truncated_bytes = self._recover()
                self._file = AppendOnlyFile(self.path)
            except BaseException:
                self._index.close()
                raise
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _recover(self) -> int:
        """Index the records the index does not cover yet (read a block at a time); cut
        a torn last line. Returns the bytes cut."""
        size = self.path.stat().st_size if self.path.exists() else 0
        self._index.check_output(size, f"the sink file {self.path}")
        if size == self._index.end:
            return 0
        complete = self._index.end  # where the complete lines read so far end
        with open(self.path, "rb") as handle:
            handle.seek(complete)
            for block in line_blocks(handle.read, RECOVER_READ_BYTES):
                if not block.endswith(b"\n"):  # a crash mid-line
                    _cut_to(self.path, complete)
                    return len(block)
                self._index_lines(block, complete)
                complete += len(block)
        return 0

    def _index_lines(self, lines: bytes, base: int) -> None:
        """Index the complete ``lines``, found at file offset ``base``."""
        ids: list[bytes] = []
        keys: list[bytes] = []
        offsets: list[int] = []
        start = 0
        while start < len(lines):
            stop = lines.index(b"\n", start)
            found = parse_line(lines[start:stop])
            if found is None:
                self.malformed_lines += 1
                log.warning(
                    "sink file %s: skipping a malformed line at byte %d (not a record)",
                    self.path, base + start,
                    extra={"event": "sink_malformed_line", "path": str(self.path),
                           "offset": base + start},
                )  # fmt: skip
            else:
                ids.append(found.record_id)
                keys.append(found.key)
                offsets.append(base + start)
            start = stop + 1
        self._index.add(ids, keys, offsets, base + len(lines))

    def _catch_up(self) -> None:
        """Under the lock: index what the file holds past the index (a batch whose
        indexing failed after it was written), before anything is deduplicated."""
        if self._index.end < self._file.size:
            with open(self.path, "rb") as handle:
                handle.seek(self._index.end)
                data = handle.read(self._file.size - self._index.end)
            self._index_lines(data, self._index.end)

    def Deliver(  # noqa: N802 - the rpc's name
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            try:
                ack = self.write(batch)
            except SinkUnavailableError as exc:
                abort(context, grpc.StatusCode.UNAVAILABLE, str(exc))
                return
            yield ack

    def write(self, batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
        """Append the batch's new records durably; the ack lists new and duplicate ids.

        Raises :class:`SinkUnavailableError` (nothing of the batch acknowledged or
        kept) while the file or its index cannot be written.
        """
        pending: set[bytes] = set()
        with self._lock:
            try:
                self._catch_up()
                ack, fresh = self._split(batch, pending)
                if fresh:
                    lines = [sink_line(record) for record in fresh]
                    offset = self._file.size
                    self._append(b"".join(lines))
                    offsets = list(accumulate((len(line) for line in lines[:-1]), initial=offset))
                    marks = [] if (mark := sender_progress(batch)) is None else [mark]
                    ids, keys = [r.record_id for r in fresh], [r.key for r in fresh]
                    self._index.add(ids, keys, offsets, self._file.size, marks)
                    self.written += len(fresh)
                    self._grew.notify_all()
                self._note_told([batch], [ack], written=bool(fresh))
            except SinkUnavailableError:
                raise
            except Exception as exc:  # the index's store failed: the file is ahead of it
                log.error("sink index of %s: %s", self.path, exc)
                raise SinkUnavailableError(
                    f"the index of sink file {self.path} cannot be written: {exc}; refusing "
                    "records until it can (resend: what the file already holds is "
                    "acknowledged as a duplicate then)"
                ) from exc
        return ack

    def _append(self, data: bytes) -> None:
        """Write and fsync ``data`` at the end, or leave the file at its durable length."""
        try:
            self._file.append(data)
        except OSError as exc:
            reason = f"{exc.strerror or exc} (errno {exc.errno})"
            log.error("sink file %s: a write failed: %s", self.path, reason)
            raise SinkUnavailableError(
                f"sink file {self.path} cannot be written: {reason}; refusing records "
                "until a write succeeds (nothing of this batch was kept; resend it)"
            ) from exc

    # -- reading (Subscribe, View) --------------------------------------------------

    def __len__(self) -> int:
        return self._index.count

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions: read from
        the checkpoint at or below ``position`` on, a block at a time."""
        with self._lock:
            if position >= self._index.count or limit <= 0:
                return []
            at, offset = self._index.checkpoint(position)
            stop, wanted = self._index.end, min(self._index.count, position + limit)
        out: list[tuple[int, record_pb2.Record]] = []
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            for block in line_blocks(lambda n: handle.read(min(n, stop - handle.tell())),
                                     READ_BYTES):  # fmt: skip
                for line in block.split(b"\n")[:-1]:
                    found = parse_line(line)
                    if found is None:
                        continue  # a malformed line holds no position
                    if at >= position:
                        out.append((at, found.record()))
                    at += 1
                    if at >= wanted:
                        return out
        return out

    def close(self) -> None:
        """Close the file and its index, and release its lock."""
        with self._lock:
            self._file.close()
            self._index.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


def _cut_to(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)
