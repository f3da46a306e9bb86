"""``FileSink``: a sink stream appended to a JSON-lines file, each record exactly once.

Per delivery batch: drop ids already written, append one line per new record
(``{"record_id", "key", "value", "ts", "producer"}``; key and value as UTF-8
text when valid, else ``{"base64": ...}``) with unbuffered writes, fsync,
then ack. A write or fsync that fails (``ENOSPC``, ``EIO``) is cut back on
the spot to the file's last durable length, nothing of the batch is
acknowledged, and the sink answers ``UNAVAILABLE`` until a write succeeds
again: the sender resends, and nothing is lost or doubled. On start the file
is read back: a torn last line (a crash mid-write) is truncated, a malformed
line elsewhere is skipped with a warning (never taken for a record), and the
ids of every record are remembered, so a record resent after a crash is
acknowledged as a duplicate and never written twice.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from deployment import AppendOnlyFile, abort, line_blocks
from millrace.wire.v1 import delivery_pb2, record_pb2
from sinks._indexed_sink import IndexedSink, SinkUnavailableError, lock_beside

log = logging.getLogger(__name__)

RECOVER_READ_BYTES = 8 << 20
"""Bytes of the file read at a time when the sink starts."""


def _text(data: bytes) -> Any:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def read_sink_file(path: str | Path) -> list[dict[str, Any]]:
    """The records of a sink file (a torn last line and malformed lines are ignored)."""
    lines = Path(path).read_bytes().split(b"\n")
    records = []
    for line in lines[:-1]:
        body = _parse(line)
        if body is not None:
            records.append(body)
    return records


def read_sink_records(path: str | Path) -> list[record_pb2.Record]:
    """The records of a sink file as the sink received them, in file order (a torn last
    line and malformed lines are ignored)."""
    return [_record_of(body) for body in read_sink_file(path)]


class FileSink(IndexedSink):
    """Serve with ``delivery_pb2_grpc.add_DeliveryServicer_to_server``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_beside(self.path)
        self._starts = array("q")  # file offset of the record at each position
        self.malformed_lines = 0
        self.truncated_bytes = self._recover()
        self._file = AppendOnlyFile(self.path)

    def _recover(self) -> int:
        """Index the file's records (read a block at a time); cut a torn last line.
        Returns the bytes cut."""
        if not self.path.exists():
            return 0
        complete = 0  # where the complete lines read so far end
        with open(self.path, "rb") as handle:
            for block in line_blocks(handle.read, RECOVER_READ_BYTES):
                if not block.endswith(b"\n"):  # a crash mid-line
                    _cut_to(self.path, complete)
                    return len(block)
                self._index_lines(block, complete)
                complete += len(block)
        return 0

    def _index_lines(self, lines: bytes, base: int) -> None:
        """Index the complete ``lines``, found at file offset ``base``."""
        start = 0
        while start < len(lines):
            stop = lines.index(b"\n", start)
            body = _parse(lines[start:stop])
            if body is None:
                self.malformed_lines += 1
                log.warning(
                    "sink file %s: skipping a malformed line at byte %d (not a record)",
                    self.path, base + start,
                    extra={"event": "sink_malformed_line", "path": str(self.path),
                           "offset": base + start},
                )  # fmt: skip
            else:
                self._seen.add(bytes.fromhex(body["record_id"]))
                self._latest[_bytes(body["key"])] = len(self._starts)
                self._starts.append(base + start)
            start = stop + 1

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
        kept) while the file cannot be written.
        """
        pending: set[bytes] = set()
        with self._lock:
            ack, fresh = self._split(batch, pending)
            if fresh:
                lines = [sink_line(record) for record in fresh]
                offset = self._file.size
                self._append(b"".join(lines))
                self._seen |= pending
                for record, line in zip(fresh, lines, strict=True):
                    self._latest[record.key] = len(self._starts)
                    self._starts.append(offset)
                    offset += len(line)
                self.written += len(fresh)
                self._grew.notify_all()
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
        return len(self._starts)

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions."""
        with self._lock:
            end = min(len(self._starts), position + limit)
            if position >= end:
                return []
            starts = self._starts[position:end]
            stop = self._starts[end] if end < len(self._starts) else self._file.size
        first = starts[0]
        with open(self.path, "rb") as handle:
            handle.seek(first)
            data = handle.read(stop - first)
        out = []
        for number, start in enumerate(starts):
            at = start - first
            out.append((position + number, _record(data[at : data.index(b"\n", at)])))
        return out

    def close(self) -> None:
        """Close the file and release its lock."""
        with self._lock:
            self._file.close()
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


def _parse(line: bytes) -> dict[str, Any] | None:
    """A record line's fields, or None when the line is not one."""
    try:
        body = json.loads(line)
        bytes.fromhex(body["record_id"])
        _ = body["key"], body["value"], body["ts"]
    except (ValueError, TypeError, KeyError):
        return None
    return body if isinstance(body, dict) else None


def _bytes(text: Any) -> bytes:
    if isinstance(text, dict):
        return base64.b64decode(text["base64"])
    return str(text).encode()


def _record(line: bytes) -> record_pb2.Record:
    return _record_of(json.loads(line))


def _record_of(body: dict[str, Any]) -> record_pb2.Record:
    return record_pb2.Record(
        record_id=bytes.fromhex(body["record_id"]),
        key=_bytes(body["key"]),
        value=_bytes(body["value"]),
        event_time_ms=body["ts"],
        producer=body.get("producer", ""),
    )


def sink_line(record: record_pb2.Record) -> bytes:
    """One line of a JSON-lines sink file: what the sink writes for ``record``."""
    body = {
        "record_id": record.record_id.hex(),
        "key": _text(record.key),
        "value": _text(record.value),
        "ts": record.event_time_ms,
        "producer": record.producer,
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
