"""``FileSink``: a sink stream appended to a JSON-lines file, each record exactly once.

Per delivery batch: drop ids already written, append one line per new record
(``{"record_id", "key", "value", "ts", "producer"}``; key and value as UTF-8
text when valid, else ``{"base64": ...}``), fsync, then ack. On start the
file is read back: a torn last line (a crash mid-write) is truncated, and
the ids of every complete line are remembered, so a record resent after a
crash is acknowledged as a duplicate and never written twice.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from millrace.wire.v1 import delivery_pb2, record_pb2
from sinks._indexed_sink import IndexedSink


def _text(data: bytes) -> Any:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def read_sink_file(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a sink file (a torn last line is ignored)."""
    lines = Path(path).read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[:-1] if line]


class FileSink(IndexedSink):
    """Serve with ``delivery_pb2_grpc.add_DeliveryServicer_to_server``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._starts: list[int] = []  # file offset of the line at each position
        self.truncated_bytes = self._recover()
        self._file = open(self.path, "ab")  # noqa: SIM115 - held for the sink's lifetime

    def _recover(self) -> int:
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        start = 0
        while start < complete:
            end = data.index(b"\n", start)
            body = json.loads(data[start:end])
            self._seen.add(bytes.fromhex(body["record_id"]))
            self._latest[_bytes(body["key"])] = len(self._starts)
            self._starts.append(start)
            start = end + 1
        if complete < len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(complete)
                handle.flush()
                os.fsync(handle.fileno())
        return len(data) - complete

    def Deliver(  # noqa: N802 - the rpc's name
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            yield self.write(batch)

    def write(self, batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
        """Append the batch's new records durably; the ack lists new and duplicate ids."""
        pending: set[bytes] = set()
        with self._lock:
            ack, fresh = self._split(batch, pending)
            if fresh:
                lines = [_line(record) for record in fresh]
                offset = self._file.tell()
                self._file.write(b"".join(lines))
                self._file.flush()
                os.fsync(self._file.fileno())
                self._seen |= pending
                for record, line in zip(fresh, lines, strict=True):
                    self._latest[record.key] = len(self._starts)
                    self._starts.append(offset)
                    offset += len(line)
                self.written += len(fresh)
                self._grew.notify_all()
        return ack

    # -- reading (Subscribe, View) --------------------------------------------------

    def __len__(self) -> int:
        return len(self._starts)

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions."""
        with self._lock:
            end = min(len(self._starts), position + limit)
            if position >= end:
                return []
            first = self._starts[position]
            last = self._starts[end] if end < len(self._starts) else None
        with open(self.path, "rb") as handle:
            handle.seek(first)
            data = handle.read() if last is None else handle.read(last - first)
        lines = data.split(b"\n")[: end - position]
        return [(position + i, _record(line)) for i, line in enumerate(lines)]

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()


def _bytes(text: Any) -> bytes:
    if isinstance(text, dict):
        return base64.b64decode(text["base64"])
    return str(text).encode()


def _record(line: bytes) -> record_pb2.Record:
    body = json.loads(line)
    return record_pb2.Record(
        record_id=bytes.fromhex(body["record_id"]),
        key=_bytes(body["key"]),
        value=_bytes(body["value"]),
        event_time_ms=body["ts"],
        producer=body.get("producer", ""),
    )


def _line(record: record_pb2.Record) -> bytes:
    body = {
        "record_id": record.record_id.hex(),
        "key": _text(record.key),
        "value": _text(record.value),
        "ts": record.event_time_ms,
        "producer": record.producer,
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
