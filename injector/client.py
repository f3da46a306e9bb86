"""``IngestClient``: push records to an injector, retrying with the same idempotency key.

A request that times out or hits an unavailable injector is resent with the
same key until it is acknowledged, so it lands in the log exactly once.

Requests go out as wire bytes built here (:func:`ingest_request_bytes`, the bytes
``IngestRequest.SerializeToString`` gives) rather than through protobuf objects: a
``IngestRecord`` per record costs more than the record's JSON parsing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import grpc

from deployment.security import Security
from millrace.wire.v1 import ingest_pb2

RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
     grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED}
)  # fmt: skip
INGEST_METHOD = "/millrace.wire.v1.Ingest/Ingest"

_U64 = (1 << 64) - 1
_I64_END = 1 << 63
_TS_CACHE_SIZE = 4096
_COMMON = b"\x1a%c\n%c%b\x12%c%b\x18%c%b"
"""A records entry whose lengths take one byte each: size, key, value, then the time
(its low 7 bits with the continuation bit, then the varint of the rest)."""


def _varint(number: int) -> bytes:
    """Protobuf's base-128 varint of ``number`` (negative: its 64-bit two's complement)."""
    number &= _U64
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _field(tag: bytes, data: bytes) -> bytes:
    return tag + _varint(len(data)) + data if data else b""


class _TimeVarints(dict[int, bytes]):
    """Varints of event times, cached: consecutive records mostly share their high bits,
    so the varint of ``ts >> 7`` is computed once per 128 ms of event time."""

    def __missing__(self, high: int) -> bytes:
        if len(self) >= _TS_CACHE_SIZE:
            self.clear()
        self[high] = encoded = _varint(high)
        return encoded


_HIGH = _TimeVarints()


def _record_bytes(key: bytes, value: bytes, ts: int) -> bytes:
    """One ``records`` entry of an IngestRequest: tag, length, IngestRecord."""
    if not -_I64_END <= ts < _I64_END:
        raise ValueError(f"event_time_ms {ts} is outside int64")
    body = _field(b"\n", key) + _field(b"\x12", value) + (b"\x18" + _varint(ts) if ts else b"")
    return b"\x1a" + _varint(len(body)) + body


def ingest_request_bytes(
    stream: str, records: Sequence[tuple[bytes, bytes, int]], idempotency_key: str = ""
) -> bytes:
    """The serialized ``IngestRequest`` of ``records``, byte for byte what protobuf writes.

    Raises TypeError for a key or value that is not bytes and ValueError for an event
    time outside int64, as building the message would.
    """
    parts = [_field(b"\n", stream.encode()), _field(b"\x12", idempotency_key.encode())]
    add = parts.append
    high = _HIGH
    for key, value, ts in records:
        klen, vlen = len(key), len(value)
        if 0 < klen < 0x80 and 0 < vlen < 0x80 and 0x80 <= ts < _I64_END:
            # The common record (one-byte lengths, a positive time): one formatting call.
            tail = high[ts >> 7]
            size = klen + vlen + len(tail) + 6
            if size < 0x80:
                add(_COMMON % (size, klen, key, vlen, value, ts & 0x7F | 0x80, tail))
                continue
        add(_record_bytes(key, value, ts))
    return b"".join(parts)


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
        backoff = 0.05
        while True:
            try:
                if self._first is not None:
                    first, self._first = self._first, None
                    return first.result()
                return self._client._call(self._request)
            except grpc.RpcError as error:
                if error.code() not in RETRYABLE or time.monotonic() > self._deadline:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)


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
        self._thread: ThreadPoolExecutor | None = None

    def ingest(
        self,
        stream: str,
        records: Sequence[tuple[bytes, bytes, int]],
        *,
        idempotency_key: str,
        give_up_after_s: float = 120.0,
    ) -> ingest_pb2.IngestResponse:
        """Append ``(key, value, event_time_ms)`` records; retries until acknowledged.

        Raises ``grpc.RpcError`` for a non-retryable status (bad input) or when
        ``give_up_after_s`` passes.
        """
        request = ingest_request_bytes(stream, records, idempotency_key)
        deadline = time.monotonic() + give_up_after_s
        backoff = 0.05
        while True:
            try:
                return self._call(request)
            except grpc.RpcError as error:
                if error.code() not in RETRYABLE or time.monotonic() > deadline:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def start_ingest(
        self,
        stream: str,
        records: Sequence[tuple[bytes, bytes, int]],
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
