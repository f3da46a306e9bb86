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

    python bench/injector_bench.py [--seconds-per-batch S] [--watermark-seconds S]
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402

from bench._measure import percentile, process_cpu_s  # noqa: E402
from computations import MIN_TIME  # noqa: E402
from millrace._runtime_tuning import tune_threads  # noqa: E402
from millrace.wire.v1 import (  # noqa: E402
    delivery_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    watermark_pb2,
    watermark_pb2_grpc,
)
from tests.cluster import CollectingSink, NodeProcess, free_port  # noqa: E402

BATCHES = (1, 100, 1000)
VALUE_BYTES = 100
KEYS = 64
OUT_OF_ORDERNESS_MS = 1_000
WARMUP_RECORDS = 60_000  # > the forwarder's sender max_pending (50,000)
IDLE_TIMEOUT_MS = 60_000
STAGES = ("stage1", "stage2", "stage3")
SAMPLE_EVERY_S = 0.02
SEND_EVERY_S = 0.01

INGEST_TOPOLOGY = """
[streams.events]
[streams.ok]

[computations.first]
handler = "tests.workloads:Poison"
intervals = 1
inputs = { events = "key" }
outputs = ["ok"]
"""

WATERMARK_TOPOLOGY = """
[streams.events]
[streams.hop1]
[streams.hop2]
[streams.out]

[computations.stage1]
handler = "bench.watermark_workload:Forward"
intervals = 1
inputs = { events = "key" }
outputs = ["hop1"]
params = { to = "hop1" }

[computations.stage2]
handler = "bench.watermark_workload:Forward"
intervals = 1
inputs = { hop1 = "key" }
outputs = ["hop2"]
params = { to = "hop2" }

[computations.stage3]
handler = "bench.watermark_workload:Forward"
intervals = 1
inputs = { hop2 = "key" }
outputs = ["out"]
params = { to = "out" }
"""


def now_ms() -> int:
    """Wall clock, ms since the Unix epoch (the clock event times and watermarks use)."""
    return time.time_ns() // 1_000_000


def self_cpu_s() -> float:
    """CPU seconds this benchmark process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class InjectorProcess:
    """``millrace injector`` as a child process; ready once it prints where it serves."""

    def __init__(self, deployment: Path, log_dir: Path, log_path: Path) -> None:
        self.command = [
            sys.executable, "-m", "millrace", "injector",
            "--deployment", str(deployment), "--log-dir", str(log_dir),
        ]  # fmt: skip
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int:
        """The child's process id."""
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        """Start and wait for the ``injector serving`` line."""
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "MILLRACE_LOG_LEVEL": "WARNING"}
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, env=env
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("injector serving"):
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"injector did not start: {line!r}; see {self.log_path}")

    def terminate(self) -> None:
        """SIGTERM (graceful drain), SIGKILL after 10 s; reap."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class CountingSink(CollectingSink):
    """A sink that acks everything and keeps only counts and end-to-end latencies."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.latencies_ms: list[float] = []

    def Deliver(  # noqa: N802 - the rpc's name
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        """Ack every record of every batch; count it and its event-time-to-now latency."""
        for batch in request_iterator:
            now = now_ms()
            with self._lock:
                self.count += len(batch.records)
                self.latencies_ms.extend(now - r.event_time_ms for r in batch.records)
            yield delivery_pb2.DeliveryAck(
                batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in batch.records]
            )


def write_deployment(
    work: Path,
    topology: str,
    *,
    injector_port: int,
    nodes: dict[str, int],
    sink: str,
    out_of_orderness_ms: int = OUT_OF_ORDERNESS_MS,
) -> Path:
    """Write ``topology.toml`` and ``deployment.toml`` (one node per computation) in ``work``."""
    (work / "topology.toml").write_text(topology)
    lines = [
        'topology = "topology.toml"',
        "[injector]",
        f'address = "127.0.0.1:{injector_port}"',
        f"out_of_orderness_ms = {out_of_orderness_ms}",
        f"idle_timeout_ms = {IDLE_TIMEOUT_MS}",
    ]
    for name, port in nodes.items():
        lines += [
            f"[nodes.{name}]",
            f'computation = "{name}"',
            "intervals = [0]",
            f'address = "127.0.0.1:{port}"',
        ]
    lines += ["[sinks.ok]" if "first" in nodes else "[sinks.out]", f'address = "{sink}"']
    deployment = work / "deployment.toml"
    deployment.write_text("\n".join(lines) + "\n")
    return deployment


def open_channel(address: str) -> grpc.Channel:
    """A channel with its own connection (no subchannel sharing between client threads)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


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
    work: Path, clients: int, seconds: float, with_node: bool
) -> tuple[list[IngestResult], dict[str, int]]:
    """Each batch size against a fresh injector (and node); returns results and log sizes."""
    results: list[IngestResult] = []
    info = {"log_bytes": 0, "forwarded_to_sink": 0}
    for batch in BATCHES:
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
        injector = InjectorProcess(deployment, phase / "log", phase / "injector.log")
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


@dataclass
class WatermarkResult:
    """Samples of the published watermarks' lag and what the run delivered."""

    names: list[str]
    out_of_orderness_ms: int
    samples: list[list[float]] = field(default_factory=list)  # per sample: lag per name
    sent: int = 0
    delivered: int = 0
    behind_s: float = 0.0
    e2e_ms: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)

    def lags(self, index: int) -> list[float]:
        """Every steady-state sample of one name's lag."""
        return [sample[index] for sample in self.samples]

    def increments(self, index: int) -> list[float]:
        """Per sample, this name's lag minus the previous name's (sampled together)."""
        return [sample[index] - sample[index - 1] for sample in self.samples]


class Watcher:
    """Keeps the latest published value of every watermark from one ``WatchWatermarks`` stream."""

    def __init__(self, address: str) -> None:
        self._channel = open_channel(address)
        self.latest: dict[str, int] = {}
        self.updates = 0
        self._call: Any = None
        self._thread = threading.Thread(target=self._run, name="watch", daemon=True)

    def start(self) -> None:
        """Open the stream and follow it in a thread."""
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(self._channel)
        self._call = stub.WatchWatermarks(
            watermark_pb2.WatchWatermarksRequest(), wait_for_ready=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            for message in self._call:
                for update in message.updates:
                    self.latest[update.computation] = update.low_watermark_ms
                    self.updates += 1
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                raise

    def stop(self) -> None:
        """Cancel the stream, close the channel."""
        if self._call is not None:
            self._call.cancel()
            self._thread.join(5)
        self._channel.close()


class Feeder:
    """Sends records at a steady rate, event time = wall clock at send, from a few threads."""

    def __init__(self, address: str, rate: float, senders: int = 4) -> None:
        self._address = address
        self._rate = rate
        self._queue: queue.Queue[ingest_pb2.IngestRequest | None] = queue.Queue()
        self._stopping = threading.Event()
        self._senders = senders
        self.sent = 0
        self.acked = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._pace, name="pace", daemon=True)] + [
            threading.Thread(target=self._send, name=f"send-{n}", daemon=True)
            for n in range(senders)
        ]

    def start(self) -> None:
        """Start pacing and sending."""
        for thread in self._threads:
            thread.start()

    def behind(self) -> int:
        """Requests built but not yet taken by a sender."""
        return self._queue.qsize()

    def _pace(self) -> None:
        started = time.perf_counter()
        value = b"v" * VALUE_BYTES
        number = 0
        while not self._stopping.wait(SEND_EVERY_S):
            due = int((time.perf_counter() - started) * self._rate)
            if due <= self.sent:
                continue
            ts = now_ms()
            records = [
                ingest_pb2.IngestRecord(key=f"k{i % KEYS}".encode(), value=value, event_time_ms=ts)
                for i in range(self.sent, due)
            ]
            self._queue.put(
                ingest_pb2.IngestRequest(
                    stream="events", idempotency_key=f"wm-{number}", records=records
                )
            )
            self.sent = due
            number += 1
        for _ in range(self._senders):
            self._queue.put(None)

    def _send(self) -> None:
        channel = open_channel(self._address)
        stub = ingest_pb2_grpc.IngestStub(channel)
        while (request := self._queue.get()) is not None:
            stub.Ingest(request, timeout=60, wait_for_ready=True)
            with self._lock:
                self.acked += len(request.records)
        channel.close()

    def stop(self) -> None:
        """Stop pacing; senders finish what is queued."""
        self._stopping.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(30)


def watermark_bench(
    work: Path, *, rate: float, seconds: float, warmup: float, out_of_orderness_ms: int
) -> WatermarkResult:
    """Run the three-stage pipeline and sample the published watermarks' lag."""
    port = free_port()
    sink = CountingSink()
    nodes = {name: free_port() for name in STAGES}
    deployment = write_deployment(
        work,
        WATERMARK_TOPOLOGY,
        injector_port=port,
        nodes=nodes,
        sink=sink.address,
        out_of_orderness_ms=out_of_orderness_ms,
    )
    injector = InjectorProcess(deployment, work / "log", work / "injector.log")
    processes = [NodeProcess(deployment, name, work / "data", work) for name in STAGES]
    address = f"127.0.0.1:{port}"
    watcher = Watcher(address)
    feeder = Feeder(address, rate)
    result = WatermarkResult(
        names=["source:events", *STAGES], out_of_orderness_ms=out_of_orderness_ms
    )
    try:
        injector.start()
        for node in processes:
            node.start()
        watcher.start()
        feeder.start()
        pids = {"injector": injector.pid} | {
            node.name: node.process.pid for node in processes if node.process is not None
        }
        sample(result, watcher, feeder, seconds=seconds, warmup=warmup, pids=pids)
        feeder.stop()
        deadline = time.monotonic() + 30
        while sink.count < feeder.sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        feeder.stop()
        watcher.stop()
        for node in processes:
            node.terminate()
        injector.terminate()
        sink.stop()
    result.sent = feeder.sent
    result.delivered = sink.count
    with sink._lock:
        result.e2e_ms = [float(x) for x in sink.latencies_ms]
    return result


def sample(
    result: WatermarkResult,
    watcher: Watcher,
    feeder: Feeder,
    *,
    seconds: float,
    warmup: float,
    pids: dict[str, int],
) -> None:
    """Every 20 ms, after ``warmup``, the lag of each watched watermark; CPU shares over it."""
    started = time.perf_counter()
    cpu_before: dict[str, float] = {}
    steady_from = 0.0
    while (elapsed := time.perf_counter() - started) < seconds:
        time.sleep(SAMPLE_EVERY_S)
        if elapsed < warmup:
            continue
        if not cpu_before:
            cpu_before = {name: process_cpu_s(pid) for name, pid in pids.items()}
            cpu_before["bench"] = self_cpu_s()
            steady_from = time.perf_counter()
        now = now_ms()
        marks = [watcher.latest.get(name, MIN_TIME) for name in result.names]
        if all(mark > MIN_TIME for mark in marks):
            result.samples.append(
                [float(now - mark - result.out_of_orderness_ms) for mark in marks]
            )
        if feeder.behind() > 0:
            result.behind_s += SAMPLE_EVERY_S
    if not cpu_before:
        return
    span = time.perf_counter() - steady_from
    cpu_after = {name: process_cpu_s(pid) for name, pid in pids.items()}
    cpu_after["bench"] = self_cpu_s()
    result.cpu = {name: (cpu_after[name] - cpu_before[name]) / span for name in cpu_before}


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
        print(f"RESULT bench=ingest batch={r.batch} records_per_s={r.records_per_s:.1f}")


def print_watermark(result: WatermarkResult, args: argparse.Namespace) -> None:
    """The watermark table and its RESULT lines."""
    print(
        f"watermark: source -> stage1 -> stage2 -> stage3 -> sink, one node process per stage, "
        f"{args.rate:,.0f} records/s for {args.watermark_seconds:g} s "
        f"(first {args.warmup_seconds:g} s discarded)"
    )
    print(
        f"  out_of_orderness_ms={result.out_of_orderness_ms} idle_timeout_ms={IDLE_TIMEOUT_MS}; "
        f"lag = now - published watermark - out_of_orderness; {len(result.samples)} samples "
        f"every {SAMPLE_EVERY_S * 1000:.0f} ms; machine: {os.cpu_count()} cpus"
    )
    print(
        f"  {'watermark':>14} {'lag p50 ms':>11} {'p90 ms':>8} {'max ms':>8} "
        f"{'+ over previous p50 ms':>23}"
    )
    for index, name in enumerate(result.names):
        lags = result.lags(index)
        step = f"{statistics.median(result.increments(index)):>23.1f}" if index else f"{'':>23}"
        print(
            f"  {name:>14} {percentile(lags, 50):>11.1f} {percentile(lags, 90):>8.1f} "
            f"{max(lags, default=float('nan')):>8.1f} {step}"
        )
    print(
        f"  sent {result.sent:,}, delivered to the sink {result.delivered:,}; end-to-end "
        f"(event time -> sink) p50 {percentile(result.e2e_ms, 50):.0f} ms, "
        f"p99 {percentile(result.e2e_ms, 99):.0f} ms; feeder behind for {result.behind_s:.1f} s"
    )
    print(
        "  cpu share in steady state: " + ", ".join(f"{k} {v:.0%}" for k, v in result.cpu.items())
    )
    for index in range(1, len(STAGES) + 1):
        print(
            f"RESULT bench=watermark stage={index} lag_ms={percentile(result.lags(index), 50):.1f}"
        )


def main() -> int:
    """Run both benchmarks, print the tables and RESULT lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-batch", type=float, default=10.0)
    parser.add_argument("--watermark-seconds", type=float, default=20.0)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
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
                work / "ingest", args.clients, args.seconds_per_batch, args.ingest_node
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
    tune_threads()
    raise SystemExit(main())
