"""The ``Ingest`` gRPC service: append records durably, then acknowledge.

Bad input is answered with a status that says what is wrong (unknown stream,
empty or oversized request, oversized record or idempotency key, an event
time out of range) and nothing of that request is written. Every request is
checked here, before it joins a group commit, so one client's bad request can
never fail another's. A key reused for other records is FAILED_PRECONDITION.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter, itemgetter

import grpc
import numpy as np

from computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from deployment import abort, brief
from engine import event_time_problem
from injector.group_commit import IdempotencyKeyReusedError
from injector.ingest_stream import IngestStream
from injector.log import AppendRequest, LogError, stream_tag
from millrace.wire.v1 import ingest_pb2, ingest_pb2_grpc

MAX_RECORD_BYTES = 4 << 20
"""Key plus value of one record."""
MAX_RECORDS_PER_REQUEST = 100_000
MAX_IDEMPOTENCY_KEY_BYTES = 1024
APPEND_TIMEOUT_S = 60.0

_FIELDS = attrgetter("key", "value", "event_time_ms")
_TIME = itemgetter(2)


class IngestService(ingest_pb2_grpc.IngestServicer):
    """Appends to the stream's log through its group committer."""

    def __init__(self, streams: Mapping[str, IngestStream]) -> None:
        self._streams = streams

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
        stream = self._streams.get(request.stream)
        if stream is None:
            sources = ", ".join(sorted(self._streams))
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"unknown stream {brief(request.stream)}: the topology's source streams are "
                f"[{sources}]",
            )
        # One pass over the protobuf records, in C (a tuple per record, no Python frame).
        count = len(request.records)
        records = list(map(_FIELDS, request.records)) if count <= MAX_RECORDS_PER_REQUEST else []
        problem = request_problem(request, records)
        if problem is not None:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem)
        append = AppendRequest(records=records, idempotency_key=request.idempotency_key.encode())
        try:
            acked = stream.submit(append).result(timeout=APPEND_TIMEOUT_S)
        except IdempotencyKeyReusedError as exc:
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
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
        response = ingest_pb2.IngestResponse(
            first_offset=acked.first_offset, replayed=acked.replayed
        )
        response.MergeFromString(
            record_ids_wire(stream_tag(request.stream), acked.first_offset, acked.count)
        )
        return response


def record_ids_wire(tag: bytes, first_offset: int, count: int) -> bytes:
    """``IngestResponse.record_ids`` of offsets ``first_offset ..`` as protobuf wire bytes
    (field 1, 16 bytes each: ``tag`` then the big-endian offset), built as one array
    rather than a bytes object per id."""
    ids = np.empty((count, 18), np.uint8)
    ids[:, :2] = (0x0A, 16)
    ids[:, 2:10] = np.frombuffer(tag, np.uint8)
    offsets = np.arange(first_offset, first_offset + count, dtype=">u8")
    ids[:, 10:] = offsets.view(np.uint8).reshape(count, 8)
    return ids.tobytes()


def request_problem(
    request: ingest_pb2.IngestRequest, records: Sequence[tuple[bytes, bytes, int]] | None = None
) -> str | None:
    """What is wrong with ``request``, naming the field and the limit (None: nothing).

    ``records``: its records as ``(key, value, event_time_ms)``, if already extracted.
    """
    if not request.records:
        return "the request carries no records"
    if len(request.records) > MAX_RECORDS_PER_REQUEST:
        return (
            f"the request carries {len(request.records)} records; the limit is "
            f"{MAX_RECORDS_PER_REQUEST} per request"
        )
    key_bytes = len(request.idempotency_key.encode())
    if key_bytes > MAX_IDEMPOTENCY_KEY_BYTES:
        return f"idempotency_key is {key_bytes} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}"
    if records and _plainly_valid(records):
        return None
    for index, record in enumerate(request.records):
        size = len(record.key) + len(record.value)
        if size > MAX_RECORD_BYTES:
            return f"record {index} is {size} bytes (key + value); the limit is {MAX_RECORD_BYTES}"
        problem = event_time_problem(record.event_time_ms)
        if problem is not None:
            return f"record {index}: {problem}"
    return None


def _plainly_valid(records: Sequence[tuple[bytes, bytes, int]]) -> bool:
    """True when no record is too large or outside the event-time range, checked without
    a Python step per record; False means look record by record (for the message)."""
    times = list(map(_TIME, records))
    if min(times) < MIN_EVENT_TIME_MS or max(times) > MAX_EVENT_TIME_MS:
        return False
    keys, values, _ = zip(*records, strict=True)
    return (
        sum(map(len, keys)) + sum(map(len, values)) <= MAX_RECORD_BYTES
        or max(map(int.__add__, map(len, keys), map(len, values))) <= MAX_RECORD_BYTES
    )
