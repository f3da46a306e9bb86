"""Bounds on the streaming calls a server runs at once, so that no peer can starve it.

A gRPC Python server runs every call on a thread of its pool, and a streaming
call keeps its thread until the stream ends. A peer that opens streams and
never reads from or writes to them would otherwise take every thread: health
checks and admin calls would queue behind them, and so would every genuine
sender. :class:`StreamLimiter` (a server interceptor) admits a streaming call
while fewer than ``max_streams`` run in all and fewer than ``max_per_peer``
from its peer (connection). At the bound, the stream that has been idle the
longest (no request for ``evict_idle_s``) is cancelled to make room, so idle
streams can never lock genuine senders out; when none is idle the newcomer
ends at once with RESOURCE_EXHAUSTED and a message. The threads the bound
leaves free keep unary calls (health, admin, ingest, reports) answering.
Abandoned connections are closed by the connection-age options
(:data:`STREAM_SERVER_OPTIONS`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

STREAM_SERVER_OPTIONS = [
    # A connection is asked to go away after 10 minutes and closed 1 minute later, streams
    # and all: a peer that opened streams and abandoned them frees its threads. Millrace's
    # own clients reopen their streams (which carry a 10-minute deadline anyway).
    ("grpc.max_connection_age_ms", 600_000),
    ("grpc.max_connection_age_grace_ms", 60_000),
]


@dataclass(eq=False)
class _Stream:
    peer: str
    context: grpc.ServicerContext
    last_request: float = field(default_factory=time.monotonic)


class _Counting:
    """A request iterator that notes when each request arrives."""

    def __init__(self, requests: Iterator[Any], stream: _Stream) -> None:
        self._requests = requests
        self._stream = stream

    def __iter__(self) -> _Counting:
        return self

    def __next__(self) -> Any:
        request = next(self._requests)
        self._stream.last_request = time.monotonic()
        return request


class StreamLimiter(grpc.ServerInterceptor):
    """Admits streaming calls up to ``max_streams`` in all and ``max_per_peer`` per peer,
    making room by cancelling the longest-idle stream."""

    def __init__(
        self, *, max_streams: int, max_per_peer: int, server: str, evict_idle_s: float = 5.0
    ) -> None:
        self._max_streams = max_streams
        self._max_per_peer = max_per_peer
        self._server = server
        self._evict_idle_s = evict_idle_s
        self._lock = threading.Lock()
        self._streams: set[_Stream] = set()
        self._per_peer: dict[str, int] = {}
        self.evicted = 0

    @property
    def active(self) -> int:
        """Streaming calls running now."""
        with self._lock:
            return len(self._streams)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or not handler.response_streaming:
            return handler
        method = handler_call_details.method
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._limited(handler.stream_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.unary_stream_rpc_method_handler(
            self._limited(handler.unary_stream, method),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _limited(
        self, behavior: Callable[[Any, grpc.ServicerContext], Iterator[Any]], method: str
    ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        def run(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            stream = _Stream(context.peer(), context)
            refusal = self._admit(stream, method)
            if refusal is not None:
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
            if isinstance(request, Iterator):
                request = _Counting(request, stream)
            try:
                for response in behavior(request, context):
                    stream.last_request = time.monotonic()  # a watch that still sends is live
                    yield response
            finally:
                self._release(stream)

        return run

    def _admit(self, stream: _Stream, method: str) -> str | None:
        victim: _Stream | None = None
        with self._lock:
            if self._per_peer.get(stream.peer, 0) >= self._max_per_peer:
                victim = self._idlest(stream.peer)
                if victim is None:
                    return (
                        f"{self._server} runs {self._max_per_peer} streaming calls from "
                        f"{stream.peer}, the limit per peer: {method} refused; close idle "
                        "streams and retry later"
                    )
            elif len(self._streams) >= self._max_streams:
                victim = self._idlest(None)
                if victim is None:
                    return (
                        f"{self._server} runs {len(self._streams)} streaming calls, its limit, "
                        f"none idle: {method} refused; retry later"
                    )
            if victim is not None:
                self._forget(victim)
                self.evicted += 1
            self._streams.add(stream)
            self._per_peer[stream.peer] = self._per_peer.get(stream.peer, 0) + 1
        if victim is not None:
            victim.context.cancel()  # its thread returns to the pool
        return None

    def _idlest(self, peer: str | None) -> _Stream | None:
        """Under the lock: the stream (of ``peer``, or any) idle longest, if long enough."""
        limit = time.monotonic() - self._evict_idle_s
        candidates = [
            s for s in self._streams if (peer is None or s.peer == peer) and s.last_request <= limit
        ]
        return min(candidates, key=lambda s: s.last_request, default=None)

    def _release(self, stream: _Stream) -> None:
        with self._lock:
            self._forget(stream)

    def _forget(self, stream: _Stream) -> None:
        if stream in self._streams:
            self._streams.discard(stream)
            left = self._per_peer.get(stream.peer, 1) - 1
            if left > 0:
                self._per_peer[stream.peer] = left
            else:
                self._per_peer.pop(stream.peer, None)
