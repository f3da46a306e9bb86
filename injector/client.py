"""``IngestClient``: push records to an injector, retrying with the same idempotency key.

A request that times out or hits an unavailable injector is resent with the
same key until it is acknowledged, so it lands in the log exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import grpc

from deployment.security import Security
from millrace.wire.v1 import ingest_pb2, ingest_pb2_grpc

RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
     grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED}
)  # fmt: skip


class IngestClient:
    """A client of one injector's ``Ingest`` service."""

    def __init__(
        self, address: str, *, security: Security = Security(), timeout_s: float = 10.0
    ) -> None:
        self.address = address
        self._timeout_s = timeout_s
        self._channel = security.open_channel(address)
        self._stub = ingest_pb2_grpc.IngestStub(self._channel)

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
        request = ingest_pb2.IngestRequest(
            stream=stream,
            idempotency_key=idempotency_key,
            records=[
                ingest_pb2.IngestRecord(key=k, value=v, event_time_ms=ts) for k, v, ts in records
            ],
        )
        deadline = time.monotonic() + give_up_after_s
        backoff = 0.05
        while True:
            try:
                response: ingest_pb2.IngestResponse = self._stub.Ingest(
                    request, timeout=self._timeout_s, wait_for_ready=True
                )
                return response
            except grpc.RpcError as error:
                if error.code() not in RETRYABLE or time.monotonic() > deadline:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
