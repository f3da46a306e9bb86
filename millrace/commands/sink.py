"""``millrace sink``: serve one sink stream into an exactly-once JSON-lines file."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent import futures
from pathlib import Path

import grpc

from computations._deployment import Deployment
from computations._sender import CHANNEL_OPTIONS
from millrace._logging import configure_logging
from millrace._service_support import (
    enable_stack_dumps,
    serve_health_and_reflection,
    wait_for_stop_signal,
)
from millrace.wire.v1 import delivery_pb2_grpc, sink_pb2_grpc
from sinks import FileSink
from sinks.read_service import SubscribeService, ViewService


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sink`` sub-command."""
    parser = subparsers.add_parser(
        "sink",
        help="serve a sink stream into an exactly-once JSON-lines file",
        description="Receive sink stream STREAM at its [sinks.STREAM] address and append each "
        "record once to a JSON-lines file.",
    )
    parser.add_argument("--deployment", required=True, help="deployment TOML file")
    parser.add_argument("--stream", required=True, help="the sink stream ([sinks.STREAM])")
    parser.add_argument("--path", help="output file (default: [sinks.STREAM] path, else "
                        "$MILLRACE_DATA_DIR/sinks/STREAM.jsonl)")  # fmt: skip
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT."""
    configure_logging()
    enable_stack_dumps()
    deployment = Deployment.load(args.deployment)
    address = deployment.sinks.get(args.stream)
    if address is None:
        known = ", ".join(sorted(deployment.sinks)) or "none"
        print(f"millrace sink: no [sinks.{args.stream}] in {args.deployment} (known: {known})",
              file=sys.stderr)  # fmt: skip
        return 2
    default = Path(os.environ.get("MILLRACE_DATA_DIR", "data")) / "sinks" / f"{args.stream}.jsonl"
    path = Path(args.path or deployment.sink_paths.get(args.stream) or default)
    sink = FileSink(path)
    security = deployment.security
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        options=CHANNEL_OPTIONS,
        interceptors=security.server_interceptors(),
    )
    delivery_pb2_grpc.add_DeliveryServicer_to_server(sink, server)
    sink_pb2_grpc.add_SubscribeServicer_to_server(SubscribeService(args.stream, sink), server)
    sink_pb2_grpc.add_ViewServicer_to_server(ViewService(args.stream, sink), server)
    services = [f"millrace.wire.v1.{name}" for name in ("Delivery", "Subscribe", "View")]
    serve_health_and_reflection(server, services)
    if security.bind(server, address) == 0:
        print(f"millrace sink: cannot listen on {address}", file=sys.stderr)
        return 2
    server.start()
    repaired = (
        f" (repaired a torn last line: {sink.truncated_bytes} bytes)"
        if sink.truncated_bytes
        else ""
    )
    print(f"sink {args.stream} serving on {address} -> {path}{repaired}", flush=True)
    wait_for_stop_signal()
    server.stop(2).wait()
    sink.close()
    return 0
