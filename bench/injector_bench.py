"""Injector benchmark: acknowledged ingest throughput and watermark lag across real processes.

1. ingest: a real ``millrace injector`` process (fsync on, group commit) and
   ``--clients`` concurrent client threads in this process, each on its own
   gRPC connection, each sending ``Ingest`` requests of ``batch`` records
   (~100-byte values, a fresh idempotency key per request) back to back for
   ``--seconds-per-batch``; throughput counts acknowledged records only.
   Each batch size gets a fresh injector (empty log). Topology
   ``events -> first (tests.workloads:Poison) -> ok``; by default no node
   runs: a warm-up of 60,000 records (batches of 1000) fills the forwarder's
   sender to its ``max_pending`` (50,000), after which the forwarder blocks
   under backpressure and the sender retries its connection with backoff
   (<= 1/s), so the figures are ingest alone rather than ingest competing
   with forwarding and a node for the CPU. ``--ingest-node`` runs a real node
   for ``first`` (and a sink in this process) to measure ingest while
   forwarding.
2. watermark: ``events -> stage1 -> stage2 -> stage3 -> out``, each stage its
   own ``millrace node`` process (``bench.watermark_workload:Forward``: forwards
   every record, no state, no timers), the injector as source and watermark
   authority (``out_of_orderness_ms`` 1000, ``idle_timeout_ms`` 60000 so idle
   advance never flatters the lag), the sink in this process. Records are fed
   at a steady ``--rate`` with event time = wall clock at send for
   ``--watermark-seconds``; a ``WatchWatermarks`` stream tracks the published
   low watermark of ``source:events`` and of each stage, sampled every 20 ms:
   ``lag = now - published watermark - out_of_orderness_ms``; the figure is the
   median over the run after ``--warmup-seconds``.

Beside the ingest figures, the same-run reference: the windows bench's plain-Python
floor over the first 300,000 events of the standard workload (how fast this machine
runs Python right now).

    python bench/injector_bench.py [--seconds-per-batch S] [--batches 1,100,1000]
                                   [--watermark-seconds S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench._injector_cluster import (  # noqa: E402
    KEYS,
    OUT_OF_ORDERNESS_MS,
    VALUE_BYTES,
    CountingSink,
    now_ms,
    open_channel,
    self_cpu_s,
    write_deployment,
)
from bench._measure import percentile, process_cpu_s  # noqa: E402
from bench._watermark_lag import print_watermark, watermark_bench  # noqa: E402
from bench.standard_workload import plain_python_floor, workload  # noqa: E402
from millrace.deployment._runtime_tuning import (  # noqa: E402
    HANDOFF_SWITCH_INTERVAL_S,
    tune_threads,
)
from millrace.wire.v1 import (  # noqa: E402
    ingest_pb2,
    ingest_pb2_grpc,
)
from tests.support import InjectorProcess, NodeProcess, free_port  # noqa: E402

BATCHES = (1, 100, 1000)
FLOOR_EVENTS = 300_000
WARMUP_RECORDS = 60_000  # > the forwarder's sender max_pending (50,000)

INGEST_TOPOLOGY = """
[streams.events]
[streams.ok]

[computations.first]
handler = "tests.workloads:Poison"
intervals = 1
inputs = { events = "key" }
outputs = ["ok"]
"""


# -- 1. ingest throughput -------------------------------------------------------------------


@dataclass
class IngestResult:
    """One batch size's run."""

    batch: int
    records: int
    seconds: float
    latencies_ms: list[float]
    injector_cpu: float
    node_cpu: float
    client_cpu: float

    @property
    def records_per_s(self) -> float:
        """Acknowledged records per second."""
        return self.records / self.seconds


def ingest_run(
    address: str, batch: int, clients: int, seconds: float, pids: tuple[int, int | None]
) -> IngestResult:
    """``clients`` threads send ``batch``-record requests back to back for ``seconds``."""
    records = [
        ingest_pb2.IngestRecord(
            key=f"k{i % KEYS}".encode(),
            value=(f"{batch}-{i}-".encode() * VALUE_BYTES)[:VALUE_BYTES],
            event_time_ms=now_ms(),
        )
        for i in range(batch)
    ]
    template = ingest_pb2.IngestRequest(stream="events", records=records)
    counts = [0] * clients
    latencies: list[list[float]] = [[] for _ in range(clients)]
    ready = threading.Barrier(clients + 1)
    run_id = time.time_ns()
    deadline = [0.0]

    def client(number: int) -> None:
        channel = open_channel(address)
        stub = ingest_pb2_grpc.IngestStub(channel)
        grpc.channel_ready_future(channel).result(timeout=30)
        ready.wait()
        sent = 0
        while time.perf_counter() < deadline[0]:
            request = ingest_pb2.IngestRequest()
            request.CopyFrom(template)
            request.idempotency_key = f"{run_id}-{batch}-{number}-{sent}"
            started = time.perf_counter()
            response = stub.Ingest(request, timeout=60, wait_for_ready=True)
            latencies[number].append((time.perf_counter() - started) * 1000)
            counts[number] += len(response.record_ids)
            sent += 1
        channel.close()

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    injector_pid, node_pid = pids
    cpu_before = (
        process_cpu_s(injector_pid),
        process_cpu_s(node_pid) if node_pid else 0.0,
        self_cpu_s(),
    )
    started = time.perf_counter()
    deadline[0] = started + seconds
    ready.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    cpu_after = (
        process_cpu_s(injector_pid),
        process_cpu_s(node_pid) if node_pid else 0.0,
        self_cpu_s(),
    )
    share = [
        (after - before) / elapsed for before, after in zip(cpu_before, cpu_after, strict=True)
    ]
    return IngestResult(
        batch=batch,
        records=sum(counts),
        seconds=elapsed,
        latencies_ms=[x for per_client in latencies for x in per_client],
        injector_cpu=share[0],
        node_cpu=share[1],
        client_cpu=share[2],
    )


def ingest_bench(
    work: Path, clients: int, seconds: float, with_node: bool, batches: tuple[int, ...]
) -> tuple[list[IngestResult], dict[str, int]]:
    """Each batch size against a fresh injector (and node); returns results and log sizes."""
    results: list[IngestResult] = []
    info = {"log_bytes": 0, "forwarded_to_sink": 0}
    data = workload(FLOOR_EVENTS)
    info["python_floor"] = round(FLOOR_EVENTS / plain_python_floor(data))
    for batch in batches:
        phase = work / f"batch-{batch}"
        phase.mkdir()
        port = free_port()
        sink = CountingSink()
        deployment = write_deployment(
            phase,
            INGEST_TOPOLOGY,
            injector_port=port,
            nodes={"first": free_port()},
            sink=sink.address,
        )
        injector = InjectorProcess(
            deployment, phase / "log", phase / "injector.log", log_level="WARNING"
        )
        node = NodeProcess(deployment, "first", phase / "data", phase) if with_node else None
        try:
            injector.start()
            if node is not None:
                node.start()
            node_pid = node.process.pid if node is not None and node.process is not None else None
            pids = (injector.pid, node_pid)
            warm = 0
            while warm < WARMUP_RECORDS:
                warm += ingest_run(f"127.0.0.1:{port}", 1000, clients, 0.2, pids).records
            results.append(ingest_run(f"127.0.0.1:{port}", batch, clients, seconds, pids))
        finally:
            if node is not None:
                node.terminate()
            injector.terminate()
            sink.stop()
        info["log_bytes"] += sum(f.stat().st_size for f in (phase / "log").rglob("segment-*.log"))
        info["forwarded_to_sink"] += sink.count
    return results, info


# -- 2. watermark lag -------------------------------------------------------------------------


# -- report ---------------------------------------------------------------------------------


def print_ingest(
    results: list[IngestResult], info: dict[str, int], args: argparse.Namespace
) -> None:
    """The ingest table and its RESULT lines."""
    forwarding = (
        "a real node for 'first' (tests.workloads:Poison) forwarding to a sink here"
        if args.ingest_node
        else "no node running (forwarder under backpressure, retrying)"
    )
    print(f"ingest: real injector process, fsync on, {args.clients} client threads, {forwarding}")
    print(f"  machine: {os.cpu_count()} cpus; {args.seconds_per_batch:g} s per batch size")
    print(f"  same-run reference: plain-Python floor {info['python_floor']:,} events/s")
    print(
        f"  {'batch':>6} {'records/s':>12} {'requests/s':>11} {'ack p50 ms':>11} "
        f"{'ack p99 ms':>11} {'injector cpu':>13} {'node cpu':>9} {'client cpu':>11}"
    )
    for r in results:
        print(
            f"  {r.batch:>6} {r.records_per_s:>12,.0f} {len(r.latencies_ms) / r.seconds:>11,.0f} "
            f"{percentile(r.latencies_ms, 50):>11.2f} {percentile(r.latencies_ms, 99):>11.2f} "
            f"{r.injector_cpu:>13.0%} {r.node_cpu:>9.0%} {r.client_cpu:>11.0%}"
        )
    print(
        f"  log size {info['log_bytes'] / 1e6:,.1f} MB; "
        f"records forwarded to the sink: {info['forwarded_to_sink']:,}"
    )
    for r in results:
        print(
            f"RESULT bench=ingest batch={r.batch} records_per_s={r.records_per_s:.1f} "
            f"python_floor_events_per_s={info['python_floor']}"
        )


def main() -> int:
    """Run both benchmarks, print the tables and RESULT lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-batch", type=float, default=10.0)
    parser.add_argument("--watermark-seconds", type=float, default=20.0)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=BATCHES,
        help="records per request, comma-separated (default: 1,100,1000)",
    )
    parser.add_argument("--out-of-orderness-ms", type=int, default=OUT_OF_ORDERNESS_MS)
    parser.add_argument("--rate", type=float, default=3_000.0, help="watermark run, records/s")
    parser.add_argument(
        "--ingest-node", action="store_true", help="run a real node for the first computation"
    )
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--skip-watermark", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="millrace-injector-bench-"))
    try:
        if not args.skip_ingest:
            (work / "ingest").mkdir()
            results, info = ingest_bench(
                work / "ingest",
                args.clients,
                args.seconds_per_batch,
                args.ingest_node,
                args.batches,
            )
            print_ingest(results, info, args)
        if not args.skip_watermark:
            (work / "watermark").mkdir()
            result = watermark_bench(
                work / "watermark",
                rate=args.rate,
                seconds=args.watermark_seconds,
                warmup=args.warmup_seconds,
                out_of_orderness_ms=args.out_of_orderness_ms,
            )
            print_watermark(result, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    tune_threads(HANDOFF_SWITCH_INTERVAL_S)
    raise SystemExit(main())
