"""The ``Ingest`` gRPC service: append records durably, then acknowledge.

Requests arrive as their wire bytes and are decoded and checked natively, a whole
request per call (:func:`millrace.dataplane.decode_ingest_request`): no protobuf object
is made per record, and the records go to the log as the native batch they were
decoded into. Bad input is answered with a status that says what is wrong (bytes
that are no ``IngestRequest``, unknown stream, empty or oversized request, oversized
record or idempotency key, an event time out of range) and nothing of that request is
written. Every request is checked here, before it joins a group commit, so one
client's bad request can never fail another's. A key reused for other records is
FAILED_PRECONDITION, and so is a new request to a finished stream.

``FinishStream`` finishes a stream (a bounded input, :meth:`IngestStream.finish`):
rare, so it is served with protobuf's own (de)serializers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import grpc

from millrace.computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from millrace.dataplane import (
    UndecodableRequestError,
    decode_ingest_request,
    ingest_response,
)
from millrace.deployment import abort, brief
from millrace.event_time import event_time_problem
from millrace.injector.group_commit import IdempotencyKeyReusedError, StreamFinishedError
from millrace.injector.ingest_stream import IngestStream
from millrace.injector.log import AppendRequest, LogError, stream_tag
from millrace.wire.v1 import ingest_pb2

MAX_RECORD_BYTES = 4 << 20
"""Key plus value of one record."""
MAX_RECORDS_PER_REQUEST = 100_000
MAX_IDEMPOTENCY_KEY_BYTES = 1024
APPEND_TIMEOUT_S = 60.0

_Stream = IngestStream
"""(The service's ``IngestStream`` method hides the class inside it.)"""
SERVICE = ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name
REQUEST_LIMITS: dict[str, int] = {
    "max_records": MAX_RECORDS_PER_REQUEST,
    "max_record_bytes": MAX_RECORD_BYTES,
    "max_idempotency_key_bytes": MAX_IDEMPOTENCY_KEY_BYTES,
    "min_event_time_ms": MIN_EVENT_TIME_MS,
    "max_event_time_ms": MAX_EVENT_TIME_MS,
}


class IngestService:
    """Appends to the stream's log through its group committer; requests and responses
    cross gRPC as bytes (see :func:`add_ingest_service`)."""

    def __init__(self, streams: Mapping[str, IngestStream]) -> None:
        self._streams = streams

    def Ingest(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return self._ingest(request, context, "Ingest")

    def IngestStream(
        self, request_iterator: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        for request in request_iterator:
            yield self._ingest(request, context, "IngestStream")

    def _ingest(self, raw: bytes, context: grpc.ServicerContext, method: str) -> bytes:
        try:
            name, idempotency_key, records, problem = decode_ingest_request(raw, **REQUEST_LIMITS)
        except UndecodableRequestError as exc:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"/{SERVICE}/{method}: undecodable request ({len(raw)} bytes): {str(exc)[:200]}",
            )
        stream = self._stream(name, context)
        if problem is not None:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem_text(problem))
        append = AppendRequest(records=records, idempotency_key=idempotency_key.encode())
        try:
            acked = stream.submit(append).result(timeout=APPEND_TIMEOUT_S)
        except (IdempotencyKeyReusedError, StreamFinishedError) as exc:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except LogError as exc:
            # The log cannot write now (a full disk): nothing of this request is kept.
            abort(context, grpc.StatusCode.UNAVAILABLE, f"stream {name!r}: {exc}")
        except TimeoutError:
            abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"stream {name!r}: the append did not finish in {APPEND_TIMEOUT_S:g} s; "
                "retry with the same idempotency key",
            )
        return ingest_response(stream_tag(name), acked.first_offset, acked.count, acked.replayed)

    def FinishStream(
        self, request: ingest_pb2.FinishStreamRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.FinishStreamResponse:
        stream = self._stream(request.stream, context)
        already = stream.finished_at is not None
        try:
            end = stream.finish()
        except OSError as exc:  # the mark could not be written (a full disk): not finished
            abort(context, grpc.StatusCode.UNAVAILABLE, f"stream {request.stream!r}: {exc}")
        return ingest_pb2.FinishStreamResponse(end_offset=end, already_finished=already)

    def _stream(self, name: str, context: grpc.ServicerContext) -> _Stream:
        stream = self._streams.get(name)
        if stream is None:
            sources = ", ".join(sorted(self._streams))
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"unknown stream {brief(name)}: the topology's source streams are [{sources}]",
            )
        return stream


def add_ingest_service(service: IngestService, server: grpc.Server) -> None:
    """Serve ``service`` as ``millrace.wire.v1.Ingest`` on ``server``, with no protobuf
    (de)serializers: the native data plane reads the request bytes and writes the
    response bytes (the wire contract is unchanged)."""
    handlers = {
        "Ingest": grpc.unary_unary_rpc_method_handler(service.Ingest),
        "IngestStream": grpc.stream_stream_rpc_method_handler(service.IngestStream),
        "FinishStream": grpc.unary_unary_rpc_method_handler(
            service.FinishStream,
            request_deserializer=ingest_pb2.FinishStreamRequest.FromString,
            response_serializer=ingest_pb2.FinishStreamResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def problem_text(problem: tuple[object, ...]) -> str:
    """The message of a problem :func:`~millrace.dataplane.decode_ingest_request` found,
    naming the field and the limit."""
    kind = problem[0]
    if kind == "no_records":
        return "the request carries no records"
    if kind == "too_many_records":
        return (
            f"the request carries {problem[1]} records; the limit is "
            f"{MAX_RECORDS_PER_REQUEST} per request"
        )
    if kind == "idempotency_key_too_long":
        return f"idempotency_key is {problem[1]} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}"
    if kind == "record_too_large":
        return (
            f"record {problem[1]} is {problem[2]} bytes (key + value); "
            f"the limit is {MAX_RECORD_BYTES}"
        )
    return f"record {problem[1]}: {event_time_problem(problem[2])}"
