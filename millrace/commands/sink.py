"""``millrace sink``: serve one sink stream into exactly-once JSON-lines or Parquet files."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent import futures
from pathlib import Path

import grpc
from prometheus_client import start_http_server

from millrace.commands._grpc_errors import CommandError, load_placement
from millrace.commands._options import add_config_argument
from millrace.delivery import CHANNEL_OPTIONS
from millrace.deployment import (
    EXCLUSIVE_PORT,
    STREAM_SERVER_OPTIONS,
    WORKER_SWITCH_INTERVAL_S,
    RequestGuard,
    StopSignals,
    StreamLimiter,
    configure_logging,
    enable_stack_dumps,
    metrics_host,
    serve_health_and_reflection,
    settle_garbage_collector,
    tune_threads,
)
from millrace.sinks import FileSink, SinkLockedError
from millrace.sinks.metrics import sink_registry
from millrace.sinks.parquet_sink import ParquetSink
from millrace.sinks.read_service import SubscribeService, ViewService
from millrace.statestore import StoreConfig
from millrace.wire.v1 import delivery_pb2_grpc, sink_pb2_grpc


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sink`` sub-command."""
    parser = subparsers.add_parser(
        "sink",
        help="serve a sink stream into exactly-once JSON-lines or Parquet files",
        description="Receive sink stream STREAM at its [sinks.STREAM] address and write each "
        'record once: appended to a JSON-lines file, or (format = "parquet") in one Parquet '
        "part file per acknowledged group of batches.",
    )
    add_config_argument(parser)
    parser.add_argument("--stream", required=True, help="the sink stream ([sinks.STREAM])")
    parser.add_argument("--path", help="output file, or directory for parquet (default: "
                        "[sinks.STREAM] path, else $MILLRACE_DATA_DIR/sinks/STREAM.jsonl or "
                        "$MILLRACE_DATA_DIR/sinks/STREAM/)")  # fmt: skip
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT."""
    tune_threads(WORKER_SWITCH_INTERVAL_S)
    configure_logging()
    enable_stack_dumps()
    signals = StopSignals()  # before the ready line: a SIGTERM right after it drains
    try:
        deployment = load_placement(args.deployment)  # addresses: no user code imported
    except CommandError as exc:
        print(f"millrace sink: {exc.message}", file=sys.stderr)
        return exc.exit_code
    address = deployment.sinks.get(args.stream)
    if address is None:
        known = ", ".join(sorted(deployment.sinks)) or "none"
        print(f"millrace sink: no [sinks.{args.stream}] in {args.deployment} (known: {known})",
              file=sys.stderr)  # fmt: skip
        return 2
    parquet = deployment.sink_format(args.stream) == "parquet"
    data_dir = Path(os.environ.get("MILLRACE_DATA_DIR", "data"))
    path = Path(args.path) if args.path else deployment.sink_output(args.stream, data_dir)
    try:
        config = StoreConfig.for_retention(deployment.sink_dedup_retention_ms.get(args.stream),
                                           sync=False)  # fmt: skip
        sink: FileSink | ParquetSink = (
            ParquetSink(path, index_config=config)
            if parquet
            else FileSink(path, index_config=config)
        )
    except SinkLockedError as exc:
        print(f"millrace sink: {exc}", file=sys.stderr)
        return 2
    sink.stream = args.stream
    security = deployment.security
    # Deliver and Subscribe streams are bounded; spare threads keep health and View answering.
    streams = StreamLimiter(max_streams=32, max_per_peer=16, server=f"sink {args.stream}")
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=32 + 8),
        options=[*CHANNEL_OPTIONS, EXCLUSIVE_PORT, *STREAM_SERVER_OPTIONS],
        interceptors=[*security.server_interceptors(), RequestGuard(), streams],
    )
    delivery_pb2_grpc.add_DeliveryServicer_to_server(sink, server)
    sink_pb2_grpc.add_SubscribeServicer_to_server(SubscribeService(args.stream, sink), server)
    sink_pb2_grpc.add_ViewServicer_to_server(ViewService(args.stream, sink), server)
    services = [f"millrace.wire.v1.{name}" for name in ("Delivery", "Subscribe", "View")]
    serve_health_and_reflection(server, services)
    try:
        security.bind(server, address)
    except OSError as exc:
        hint = (
            f" (a sink your own process serves is marked external = true in [sinks.{args.stream}]:"
            " millrace up then leaves it alone)"
        )
        print(f"millrace sink: {exc}{hint}", file=sys.stderr)
        sink.close()
        return 2
    server.start()
    settle_garbage_collector()
    metrics = _serve_metrics(
        deployment.sink_metrics_ports.get(args.stream), address, args.stream, sink
    )
    repaired = ""
    if isinstance(sink, FileSink) and sink.truncated_bytes:
        repaired = f" (repaired a torn last line: {sink.truncated_bytes} bytes)"
    elif isinstance(sink, ParquetSink) and sink.removed_tmp_files:
        repaired = f" (removed {sink.removed_tmp_files} unfinished .tmp part files)"
    print(f"sink {args.stream} serving on {address} -> {path}{metrics}{repaired}", flush=True)
    signals.wait()
    server.stop(2).wait()
    sink.close()
    return 0


def _serve_metrics(
    port: int | None, address: str, stream: str, sink: FileSink | ParquetSink
) -> str:
    """Serve the sink's metrics on ``port`` (None: not at all); what the ready line says."""
    if port is None:
        return ""
    http, _ = start_http_server(
        port, addr=metrics_host(address), registry=sink_registry(stream, sink)
    )
    return f", metrics on :{http.server_port}"
