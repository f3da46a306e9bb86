"""The ``Ingest`` gRPC service: append records durably, then acknowledge.

Bad input is answered with a status that says what is wrong (unknown stream,
empty request, oversized record) and nothing of that request is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc

from injector.log import AppendRequest, LogError, stream_tag
from millrace._service_support import abort
from millrace.wire.v1 import ingest_pb2, ingest_pb2_grpc

if TYPE_CHECKING:
    from injector.server import Injector

MAX_RECORD_BYTES = 4 << 20
APPEND_TIMEOUT_S = 60.0


class IngestService(ingest_pb2_grpc.IngestServicer):
    """Appends to the stream's log through its group committer."""

    def __init__(self, injector: Injector) -> None:
        self._injector = injector

    def Ingest(
        self, request: ingest_pb2.IngestRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        return self._ingest(request, context)

    def IngestStream(
        self, request_iterator: Iterator[ingest_pb2.IngestRequest], context: grpc.ServicerContext
    ) -> Iterator[ingest_pb2.IngestResponse]:
        for request in request_iterator:
            yield self._ingest(request, context)

    def _ingest(
        self, request: ingest_pb2.IngestRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        stream = self._injector.streams.get(request.stream)
        if stream is None:
            sources = ", ".join(sorted(self._injector.streams))
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"unknown stream {request.stream!r}: the topology's source streams are [{sources}]",
            )
        if not request.records:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "the request carries no records")
        for index, record in enumerate(request.records):
            size = len(record.key) + len(record.value)
            if size > MAX_RECORD_BYTES:
                abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"record {index} is {size} bytes; the limit is {MAX_RECORD_BYTES}",
                )
        append = AppendRequest(
            records=[(r.key, r.value, r.event_time_ms) for r in request.records],
            idempotency_key=request.idempotency_key.encode(),
        )
        try:
            acked = stream.submit(append).result(timeout=APPEND_TIMEOUT_S)
        except LogError as exc:
            # The log cannot write now (a full disk): nothing of this request is kept.
            abort(context, grpc.StatusCode.UNAVAILABLE, f"stream {request.stream!r}: {exc}")
        except TimeoutError:
            abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"stream {request.stream!r}: the append did not finish in {APPEND_TIMEOUT_S:g} s; "
                "retry with the same idempotency key",
            )
        tag = stream_tag(request.stream)  # hashed once, not per record
        offsets = range(acked.first_offset, acked.first_offset + acked.count)
        return ingest_pb2.IngestResponse(
            record_ids=[tag + offset.to_bytes(8, "big") for offset in offsets],
            first_offset=acked.first_offset,
            replayed=acked.replayed,
        )
