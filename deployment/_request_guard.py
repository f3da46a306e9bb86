"""Undecodable requests get INVALID_ARGUMENT with what failed, on every method of a server.

gRPC Python answers a request its deserializer cannot parse with INTERNAL
("Exception deserializing request!"), which reads like a server bug. The
:class:`RequestGuard` interceptor wraps every method's deserializer: a
request that does not parse reaches the method as an :class:`Undecodable`
value, which the guard answers with INVALID_ARGUMENT naming the method, the
size and the parse error, before any service code sees it. The stream it
arrived on ends; the server and every other call are unaffected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request that did not parse."""

    size: int
    error: str


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, or anything a custom deserializer raises
            return Undecodable(len(data), str(exc) or type(exc).__name__)

    return parse


def _refuse(context: grpc.ServicerContext, method: str, bad: Undecodable) -> None:
    context.abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{method}: undecodable request ({bad.size} bytes): {bad.error[:200]}",
    )


class RequestGuard(grpc.ServerInterceptor):
    """Answers undecodable requests with INVALID_ARGUMENT on every method."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = handler_call_details.method
        parse = _tolerant(handler.request_deserializer)
        serialize = handler.response_serializer
        if handler.request_streaming:
            behavior = handler.stream_stream if handler.response_streaming else handler.stream_unary

            def streamed(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
                return behavior(_checked(requests, context, method), context)

            factory = (
                grpc.stream_stream_rpc_method_handler
                if handler.response_streaming
                else grpc.stream_unary_rpc_method_handler
            )
            return factory(streamed, request_deserializer=parse, response_serializer=serialize)
        behavior = handler.unary_stream if handler.response_streaming else handler.unary_unary

        def single(request: Any, context: grpc.ServicerContext) -> Any:
            if isinstance(request, Undecodable):
                _refuse(context, method, request)
            return behavior(request, context)

        factory = (
            grpc.unary_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        return factory(single, request_deserializer=parse, response_serializer=serialize)


def _checked(requests: Iterator[Any], context: grpc.ServicerContext, method: str) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, Undecodable):
            _refuse(context, method, request)
        yield request
