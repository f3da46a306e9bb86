"""``Subscribe`` and ``View`` over a sink: read a sink stream, resumably.

Both serve any :class:`ReadableSink`: the JSON-lines :class:`~sinks.file_sink.FileSink`
and the Parquet :class:`~sinks.parquet_sink.ParquetSink` alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import grpc

from millrace.deployment import abort
from millrace.wire.v1 import record_pb2, sink_pb2, sink_pb2_grpc

DEFAULT_BATCH = 1000


class ReadableSink(Protocol):
    """A sink whose records have positions 0, 1, 2, ... in commit order."""

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions."""
        ...

    def wait_beyond(self, position: int, timeout_s: float) -> bool:
        """Block until a record exists at ``position`` (True) or the timeout (False)."""
        ...

    def latest(self, key: bytes) -> tuple[int, record_pb2.Record] | None:
        """The latest record with ``key`` and its position."""
        ...


class SubscribeService(sink_pb2_grpc.SubscribeServicer):
    """Batches from the requested position on, then follows the sink as it grows."""

    def __init__(self, stream: str, sink: ReadableSink) -> None:
        self._stream = stream
        self._sink = sink

    def Subscribe(
        self, request: sink_pb2.SubscribeRequest, context: grpc.ServicerContext
    ) -> Iterator[sink_pb2.SubscribeBatch]:
        if request.stream != self._stream:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"this sink serves stream {self._stream!r}, not {request.stream!r}",
            )
        position = request.from_position
        limit = request.max_batch or DEFAULT_BATCH
        while context.is_active():
            found = self._sink.read(position, limit)
            if not found:
                self._sink.wait_beyond(position, 0.5)
                continue
            position = found[-1][0] + 1
            yield sink_pb2.SubscribeBatch(
                records=[sink_pb2.SinkRecord(position=p, record=r) for p, r in found],
                next_position=position,
            )


class ViewService(sink_pb2_grpc.ViewServicer):
    """The latest record per key."""

    def __init__(self, stream: str, sink: ReadableSink) -> None:
        self._stream = stream
        self._sink = sink

    def Get(
        self, request: sink_pb2.ViewGetRequest, context: grpc.ServicerContext
    ) -> sink_pb2.ViewGetResponse:
        if request.stream != self._stream:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"this sink serves stream {self._stream!r}, not {request.stream!r}",
            )
        latest = self._sink.latest(request.key)
        if latest is None:
            return sink_pb2.ViewGetResponse(found=False)
        position, record = latest
        return sink_pb2.ViewGetResponse(
            found=True, latest=sink_pb2.SinkRecord(position=position, record=record)
        )
