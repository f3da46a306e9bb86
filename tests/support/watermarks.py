"""Reading the authority's published watermarks from a test, and waiting for them."""

from __future__ import annotations

import time
from collections.abc import Iterable

import grpc

from millrace.wire.v1 import watermark_pb2, watermark_pb2_grpc


def published_watermarks(address: str, timeout_s: float = 5.0) -> dict[str, int]:
    """The authority's published watermarks now: the first message of a watch."""
    with grpc.insecure_channel(address) as channel:
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
        call = stub.WatchWatermarks(watermark_pb2.WatchWatermarksRequest(), timeout=timeout_s)
        try:
            first = next(call)
        finally:
            call.cancel()
    return {update.computation: update.low_watermark_ms for update in first.updates}


def wait_for_watermarks(
    address: str, names: Iterable[str], at_least_ms: int, timeout_s: float
) -> dict[str, int]:
    """Poll until every published watermark of ``names`` is at least ``at_least_ms``;
    the last values read (the caller asserts on them: a liveness check)."""
    wanted = list(names)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            marks = published_watermarks(address)
        except grpc.RpcError:
            marks = {}  # the authority restarting: ask again
        if all(marks.get(name, at_least_ms - 1) >= at_least_ms for name in wanted):
            return marks
        if time.monotonic() > deadline:
            return marks
        time.sleep(0.2)
