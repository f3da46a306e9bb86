"""What Python gRPC alone lets any server of the ``Ingest`` contract take, beside Millrace's.

The clients are ``bench/injector_bench.py``'s (``--clients`` threads in this
process, each on its own connection, ``Ingest`` requests of 1,000 records with
~100-byte values, back to back). The servers, each a child process with the
same gRPC settings as the injector (sync server, thread pool):

- ``transport``: takes the request bytes unparsed and answers a prebuilt
  response of 1,000 record ids: the cost of gRPC's Python binding alone;
- ``protobuf``: parses the request, reads every record's key, value and event
  time, and builds the response's 1,000 ids, both as the injector does (C-level
  passes): the least any server of this wire contract does, with nothing durable;
- ``millrace``: a real ``millrace injector`` (fsync on, group commit, the
  forwarder under backpressure as in ``injector_bench.py``).

A server's ceiling is where its process runs out of CPU, so each row prints the
server's CPU per record beside the throughput.

    python bench/ingest_floor_bench.py [--seconds S] [--clients N] [--runs R]

Prints a table and one ``RESULT bench=ingest_floor ...`` line per server (medians).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from operator import attrgetter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench._grpc_child import serve_methods  # noqa: E402
from bench.injector_bench import IngestResult, ingest_bench, ingest_run  # noqa: E402
from millrace.dataplane import ingest_response  # noqa: E402
from millrace.wire.v1 import ingest_pb2  # noqa: E402
from tests.support import free_port  # noqa: E402

BATCH = 1000
SERVICE = "millrace.wire.v1.Ingest"
SERVERS = ("transport", "protobuf", "millrace")
_FIELDS = attrgetter("key", "value", "event_time_ms")


def serve(port: int, mode: str) -> None:
    """The child process: an ``Ingest`` server that keeps nothing."""
    prebuilt = ingest_response(b"bench-ta", 0, BATCH, False)

    def transport(request: bytes, context: grpc.ServicerContext) -> bytes:
        return prebuilt

    def protobuf(
        request: ingest_pb2.IngestRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        # The fields and the ids as the injector takes and makes them (C-level passes).
        fields = list(map(_FIELDS, request.records))
        return ingest_pb2.IngestResponse.FromString(
            ingest_response(b"bench-ta", 0, len(fields), False)
        )

    methods = {
        "transport": grpc.unary_unary_rpc_method_handler(transport),
        "protobuf": grpc.unary_unary_rpc_method_handler(
            protobuf,
            request_deserializer=ingest_pb2.IngestRequest.FromString,
            response_serializer=ingest_pb2.IngestResponse.SerializeToString,
        ),
    }
    serve_methods(port, SERVICE, {"Ingest": methods[mode]}, workers=8)


def floor_run(mode: str, clients: int, seconds: float) -> IngestResult:
    """One server of ``mode`` in a child process, measured as injector_bench measures."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        address = f"127.0.0.1:{port}"
        ingest_run(address, BATCH, clients, 1.0, (child.pid, None))  # warm-up
        return ingest_run(address, BATCH, clients, seconds, (child.pid, None))
    finally:
        child.terminate()
        child.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--serve", choices=SERVERS[:2], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.serve)
        return 0
    results: dict[str, list[IngestResult]] = {mode: [] for mode in SERVERS}
    floors: list[int] = []
    for _ in range(args.runs):
        for mode in SERVERS[:2]:
            results[mode].append(floor_run(mode, args.clients, args.seconds))
        work = Path(tempfile.mkdtemp(prefix="millrace-ingest-floor-"))
        try:
            measured, info = ingest_bench(work, args.clients, args.seconds, False, (BATCH,))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results["millrace"].extend(measured)
        floors.append(info["python_floor"])
    print(
        f"Ingest of {BATCH:,}-record requests, {args.clients} client threads, "
        f"{args.seconds:g} s each, medians of {args.runs} (cpus={os.cpu_count()}); "
        f"plain-Python floor {statistics.median(floors):,.0f} events/s"
    )
    print(f"  {'server':<10} {'records/s':>11} {'server cpu':>11} {'server us/record':>17}")
    for mode in SERVERS:
        rate = statistics.median(r.records_per_s for r in results[mode])
        cpu = statistics.median(r.injector_cpu for r in results[mode])
        per_record = statistics.median(
            r.injector_cpu / r.records_per_s * 1e6 for r in results[mode]
        )
        print(f"  {mode:<10} {rate:>11,.0f} {cpu:>11.0%} {per_record:>17.2f}")
        print(
            f"RESULT bench=ingest_floor server={mode} records_per_s={rate:.0f} "
            f"server_cpu={cpu:.2f} server_us_per_record={per_record:.2f} "
            f"python_floor_events_per_s={statistics.median(floors):.0f} runs={args.runs}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
