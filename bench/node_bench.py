"""Node throughput and latency: a two-stage exactly-once pipeline across real processes.

``source (this process) -> stage 1 node -> stage 2 node -> sink (this process)``,
strong productions, sync commits, real gRPC on loopback. Every record passes
both stages. Two runs:

1. saturated: push ``--records`` as fast as backpressure allows; throughput is
   records fully delivered to the sink per second;
2. half load: send at 50 % of that rate for ``--latency-seconds``; each value
   carries its send time, the sink records end-to-end latency per record
   (``--rate R`` sends R records/s instead: a fixed load for A/B comparisons on
   a machine whose speed drifts).

    python bench/node_bench.py [--records N] [--latency-seconds S] [--rate R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import percentile, process_cpu_s  # noqa: E402
from millrace.computations import IntervalId, Topology  # noqa: E402
from millrace.deployment._runtime_tuning import (  # noqa: E402
    WORKER_SWITCH_INTERVAL_S,
    settle_garbage_collector,
    tune_threads,
)
from millrace.wire.v1 import delivery_pb2, record_pb2  # noqa: E402
from tests.support import CollectingSink, NodeProcess, SourceDriver, free_port  # noqa: E402

TOPOLOGY = """
[streams.clicks]
[streams.by_page]
[streams.out]

[computations.enrich]
handler = "bench.workload:Enrich"
intervals = 1
inputs = { clicks = "key" }
outputs = ["by_page"]

[computations.pages]
handler = "bench.workload:PageTotals"
intervals = 1
inputs = { by_page = "key" }
outputs = ["out"]
"""


class LatencySink(CollectingSink):
    """Counts distinct sink records and the latency encoded in each value (send time in ns).

    Per batch, not per record, where it can: this process shares the machine's
    CPUs with the nodes under test, so its own cost lowers what they can reach.
    """

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[bytes] = set()
        self._latencies: list[np.ndarray] = []
        self.count = 0

    def Deliver(  # noqa: N802 - the rpc's name
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            now = time.perf_counter_ns()
            records = list(batch.records)
            ids = [r.record_id for r in records]
            with self._lock:
                fresh = [r for r, rid in zip(records, ids, strict=True) if rid not in self._seen]
                self._seen.update(ids)
                self.count += len(fresh)
                if fresh:
                    sent = np.frombuffer(b"".join([r.value[8:16] for r in fresh]), dtype=">u8")
                    self._latencies.append((now - sent.astype(np.int64)) / 1e6)
            yield delivery_pb2.DeliveryAck(batch_seq=batch.batch_seq, committed_ids=ids)

    def reset_latencies(self) -> None:
        """Forget the latencies measured so far."""
        with self._lock:
            self._latencies.clear()

    def latencies_ms(self) -> list[float]:
        """Every distinct record's latency since the last reset, in milliseconds."""
        with self._lock:
            return np.concatenate(self._latencies).tolist() if self._latencies else []


def make_record(i: int, pages: int, users: int) -> record_pb2.Record:
    value = f"page{i % pages:04d}".encode()[:8].ljust(8, b"_") + time.perf_counter_ns().to_bytes(
        8, "big"
    )
    return record_pb2.Record(
        record_id=i.to_bytes(16, "big"),
        key=f"user{(i * 7919) % users}".encode(),
        value=value,
        event_time_ms=i,
        stream="clicks",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--load", type=float, default=0.5, help="latency run's share of max")
    parser.add_argument(
        "--rate",
        type=float,
        help="latency run at this many records/s instead of a share of max (for A/B runs)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="millrace-node-bench-"))
    sink = LatencySink()
    ports = {"enrich": free_port(), "pages": free_port()}
    (work / "topology.toml").write_text(TOPOLOGY)
    deployment = work / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[nodes.enrich]
computation = "enrich"
intervals = [0]
address = "127.0.0.1:{ports["enrich"]}"
[nodes.pages]
computation = "pages"
intervals = [0]
address = "127.0.0.1:{ports["pages"]}"
[sinks.out]
address = "{sink.address}"
"""
    )
    nodes = [NodeProcess(deployment, name, work / "data", work) for name in ports]
    for node in nodes:
        node.start()
    topology = Topology.load(work / "topology.toml")
    driver = SourceDriver(
        topology, "clicks", {IntervalId("enrich", 0): f"127.0.0.1:{ports['enrich']}"}
    )
    # The load generator and sink share this process: GC pauses here would count as latency.
    settle_garbage_collector()
    try:
        cpu_before = [cpu_seconds(node) for node in nodes]
        throughput = saturated(driver, sink, args.records)
        cpu_us = cpu_us_per_record(nodes, cpu_before, args.records)
        rate = args.rate or throughput * args.load
        cpu_before = [cpu_seconds(node) for node in nodes]
        own_before = time.process_time()
        latencies = half_load(driver, sink, rate, args.latency_seconds, args.records)
        half_cpu_us = cpu_us_per_record(nodes, cpu_before, len(latencies))
        own_us = (time.process_time() - own_before) / max(1, len(latencies)) * 1e6
    finally:
        driver.stop()
        for node in nodes:
            node.terminate()
        sink.stop()
        shutil.rmtree(work, ignore_errors=True)
    p50, p95, p99 = (percentile(latencies, q) for q in (50, 95, 99))
    print(
        f"two-stage exactly-once pipeline, strong productions, sync commits (cpus={os.cpu_count()})"
    )
    print(f"  saturated throughput: {throughput:,.0f} records/s ({args.records:,} records)")
    print(
        "  CPU per record (all threads of the node process): "
        + ", ".join(f"{node.name} {us:.1f} us" for node, us in zip(nodes, cpu_us, strict=True))
    )
    load = rate / throughput
    print(f"  latency at {load:.0%} load ({rate:,.0f} records/s, {len(latencies):,} records):")
    print(f"    p50 {p50:.2f} ms   p95 {p95:.2f} ms   p99 {p99:.2f} ms")
    print(
        "    CPU per record: "
        + ", ".join(f"{node.name} {us:.1f} us" for node, us in zip(nodes, half_cpu_us, strict=True))
        + f", source and sink (this process) {own_us:.1f} us"
    )
    print(f"RESULT bench=node records_per_s={throughput:.1f}")
    for node, us in zip(nodes, cpu_us, strict=True):
        print(f"RESULT bench=node_cpu stage={node.name} cpu_us_per_record={us:.2f}")
    print(
        f"RESULT bench=node_latency load={round(load, 2) if args.rate else args.load} "
        f"p50_ms={p50:.2f} p95_ms={p95:.2f} p99_ms={p99:.2f}"
    )
    return 0


def cpu_us_per_record(nodes: list[NodeProcess], before: list[float], records: int) -> list[float]:
    """Per node, CPU microseconds per record since ``before`` (from :func:`cpu_seconds`)."""
    return [
        (cpu_seconds(node) - then) / max(1, records) * 1e6
        for node, then in zip(nodes, before, strict=True)
    ]


def cpu_seconds(node: NodeProcess) -> float:
    """User + system CPU time a node process has used so far."""
    assert node.process is not None
    return process_cpu_s(node.process.pid)


def saturated(driver: SourceDriver, sink: LatencySink, count: int) -> float:
    records = [make_record(i, 500, 5000) for i in range(count)]
    started = time.perf_counter()
    for start in range(0, count, 1000):
        driver.send(records[start : start + 1000])
    while sink.count < count:
        time.sleep(0.01)
    return count / (time.perf_counter() - started)


def half_load(
    driver: SourceDriver, sink: LatencySink, rate: float, seconds: float, offset: int
) -> list[float]:
    sink.reset_latencies()
    target = sink.count + int(rate * seconds)
    batch = max(1, int(rate / 200))  # 200 sends per second
    started = time.perf_counter()
    i = offset
    sent = 0
    while sent < target - offset and i - offset < rate * seconds:
        due = started + (i - offset) / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        driver.send([make_record(i + j, 500, 5000) for j in range(batch)])
        i += batch
        sent += batch
    deadline = time.monotonic() + 60
    while sink.count < offset + (i - offset) and time.monotonic() < deadline:
        time.sleep(0.01)
    return sink.latencies_ms()


if __name__ == "__main__":
    tune_threads(WORKER_SWITCH_INTERVAL_S)
    raise SystemExit(main())
