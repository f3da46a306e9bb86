"""The keepalive policy holds a connection up however long it idles (issue 30: a node's
log filled with GOAWAY ``too_many_pings``: servers accepted a ping without data only
every 5 minutes, clients sent one every 20 s).

The production policy pings every 20 s, so a test of it at that pace takes minutes:
the same policy (the same options, ratios and server limit) is run a hundred times
faster, for as many pings as it took gRPC to hang up on the old one and more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc

from millrace.deployment import KEEPALIVE_OPTIONS, keepalive_options

SERVICE = "test.Idle"


def test_the_production_policy_is_the_scaled_one() -> None:
    assert keepalive_options() == KEEPALIVE_OPTIONS
    options = dict(KEEPALIVE_OPTIONS)
    accepted = options["grpc.http2.min_ping_interval_without_data_ms"]
    assert options["grpc.keepalive_time_ms"] >= accepted, "clients ping no faster than accepted"


def test_an_idle_stream_outlives_many_keepalive_pings() -> None:
    options = keepalive_options(200)  # the production policy, 100x faster

    def echo(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        yield from requests

    server = grpc.server(futures.ThreadPoolExecutor(2), options=options)
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"E": handler}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
    done = threading.Event()

    def requests() -> Iterator[bytes]:
        yield b"first"
        done.wait(6)  # idle: ~30 client pings (the old limits ended the stream by the 3rd)
        yield b"last"

    try:
        call = channel.stream_stream(f"/{SERVICE}/E")(requests(), timeout=30)
        started = time.monotonic()
        answers = list(call)
        assert answers == [b"first", b"last"]
        assert time.monotonic() - started >= 5, "the stream idled"
    finally:
        done.set()
        channel.close()
        server.stop(0)
