"""``IngestClient``: push records to an injector, retrying with the same idempotency key.

A request that times out or hits an unavailable injector is resent with the
same key until it is acknowledged, so it lands in the log exactly once.

Requests go out as wire bytes built natively (:func:`ingest_request_bytes`, the bytes
``IngestRequest.SerializeToString`` gives) rather than through protobuf objects: a
``IngestRecord`` per record costs more than the record's JSON parsing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import grpc

from millrace.dataplane import RecordBatch, ingest_request
from millrace.deployment.security import Security
from millrace.wire.v1 import ingest_pb2

RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
     grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED}
)  # fmt: skip
_T = TypeVar("_T")
INGEST_METHOD = "/millrace.wire.v1.Ingest/Ingest"
FINISH_METHOD = "/millrace.wire.v1.Ingest/FinishStream"


def ingest_request_bytes(
    stream: str,
    records: RecordBatch | Sequence[tuple[bytes, bytes, int]],
    idempotency_key: str = "",
) -> bytes:
    """The serialized ``IngestRequest`` of ``records``, byte for byte what protobuf writes
    (encoded natively: :func:`millrace.dataplane.ingest_request`).

    Raises TypeError for a key or value that is not bytes and ValueError for an event
    time outside int64, as building the message would.
    """
    batch = records if isinstance(records, RecordBatch) else RecordBatch(records)
    return ingest_request(stream, idempotency_key, batch)


def retrying(call: Callable[[], _T], deadline: float) -> _T:
    """``call()``, again after a retryable failure (backing off up to 1 s) until it
    answers; raises ``grpc.RpcError`` for a status that is not retryable or once
    ``deadline`` (``time.monotonic``) has passed."""
    backoff = 0.05
    while True:
        try:
            return call()
        except grpc.RpcError as error:
            if error.code() not in RETRYABLE or time.monotonic() > deadline:
                raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)


class PendingIngest:
    """A request on its way: :meth:`result` waits for the acknowledgement, resending the
    same bytes on a retryable failure, so work can go on while the injector appends."""

    def __init__(self, client: IngestClient, request: bytes, give_up_after_s: float) -> None:
        self._client = client
        self._request = request
        self._deadline = time.monotonic() + give_up_after_s
        self._first: Future[ingest_pb2.IngestResponse] | None = client._sender().submit(
            client._call, request
        )

    def result(self) -> ingest_pb2.IngestResponse:
        """The acknowledgement; raises ``grpc.RpcError`` for a non-retryable status (bad
        input) or once ``give_up_after_s`` has passed."""
        if self._first is not None:
            first, self._first = self._first, None
            try:
                return first.result()
            except grpc.RpcError as error:
                if error.code() not in RETRYABLE or time.monotonic() > self._deadline:
                    raise
        return retrying(lambda: self._client._call(self._request), self._deadline)


class IngestClient:
    """A client of one injector's ``Ingest`` service."""

    def __init__(
        self, address: str, *, security: Security = Security(), timeout_s: float = 10.0
    ) -> None:
        self.address = address
        self._timeout_s = timeout_s
        self._channel = security.open_channel(address)
        # Requests are sent as bytes already serialized (no request serializer).
        self._ingest = self._channel.unary_unary(
            INGEST_METHOD, response_deserializer=ingest_pb2.IngestResponse.FromString
        )
        self._finish = self._channel.unary_unary(
            FINISH_METHOD,
            request_serializer=ingest_pb2.FinishStreamRequest.SerializeToString,
            response_deserializer=ingest_pb2.FinishStreamResponse.FromString,
        )
        self._thread: ThreadPoolExecutor | None = None

    def finish(
        self, stream: str, *, give_up_after_s: float = 120.0
    ) -> ingest_pb2.FinishStreamResponse:
        """Finish ``stream`` (a bounded input is complete; idempotent): it takes no new
        records, and its watermark goes to the end of time once every record is
        acknowledged downstream. Retries like :meth:`ingest`."""
        request = ingest_pb2.FinishStreamRequest(stream=stream)

        def call() -> ingest_pb2.FinishStreamResponse:
            response: ingest_pb2.FinishStreamResponse = self._finish(
                request, timeout=self._timeout_s, wait_for_ready=True
            )
            return response

        return retrying(call, time.monotonic() + give_up_after_s)

    def ingest(
        self,
        stream: str,
        records: RecordBatch | Sequence[tuple[bytes, bytes, int]],
        *,
        idempotency_key: str,
        give_up_after_s: float = 120.0,
    ) -> ingest_pb2.IngestResponse:
        """Append ``(key, value, event_time_ms)`` records; retries until acknowledged.

        Raises ``grpc.RpcError`` for a non-retryable status (bad input) or when
        ``give_up_after_s`` passes.
        """
        request = ingest_request_bytes(stream, records, idempotency_key)
        return retrying(lambda: self._call(request), time.monotonic() + give_up_after_s)

    def start_ingest(
        self,
        stream: str,
        records: RecordBatch | Sequence[tuple[bytes, bytes, int]],
        *,
        idempotency_key: str,
        give_up_after_s: float = 120.0,
    ) -> PendingIngest:
        """Send the request from a background thread now; :meth:`PendingIngest.result`
        waits for its acknowledgement (retrying as :meth:`ingest` does)."""
        request = ingest_request_bytes(stream, records, idempotency_key)
        return PendingIngest(self, request, give_up_after_s)

    def _call(self, request: bytes) -> ingest_pb2.IngestResponse:
        response: ingest_pb2.IngestResponse = self._ingest(
            request, timeout=self._timeout_s, wait_for_ready=True
        )
        return response

    def _sender(self) -> ThreadPoolExecutor:
        # One long-lived thread: grpc's own futures start a thread per call when none
        # other is in flight, which cost more than building the request.
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="ingest-send")
        return self._thread

    def close(self) -> None:
        """Close the channel; a request still being sent is cancelled."""
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
        self._channel.close()
