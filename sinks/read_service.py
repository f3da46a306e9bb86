"""``Subscribe`` and ``View`` over a :class:`FileSink`: read a sink stream, resumably."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from millrace.wire.v1 import sink_pb2, sink_pb2_grpc
from sinks.file_sink import FileSink

DEFAULT_BATCH = 1000


class SubscribeService(sink_pb2_grpc.SubscribeServicer):
    """Batches from the requested position on, then follows the file as it grows."""

    def __init__(self, stream: str, sink: FileSink) -> None:
        self._stream = stream
        self._sink = sink

    def Subscribe(
        self, request: sink_pb2.SubscribeRequest, context: grpc.ServicerContext
    ) -> Iterator[sink_pb2.SubscribeBatch]:
        if request.stream != self._stream:
            context.abort(
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

    def __init__(self, stream: str, sink: FileSink) -> None:
        self._stream = stream
        self._sink = sink

    def Get(
        self, request: sink_pb2.ViewGetRequest, context: grpc.ServicerContext
    ) -> sink_pb2.ViewGetResponse:
        if request.stream != self._stream:
            context.abort(
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
