"""The watermark-lag half of ``bench/injector_bench.py``: a three-stage pipeline of
forwarding nodes fed at a steady rate, the published low watermarks sampled
(see that module's docstring for the method)."""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from bench._injector_cluster import (
    IDLE_TIMEOUT_MS,
    KEYS,
    VALUE_BYTES,
    CountingSink,
    now_ms,
    open_channel,
    self_cpu_s,
    write_deployment,
)
from bench._measure import percentile, process_cpu_s
from millrace.computations import MIN_TIME
from millrace.wire.v1 import (
    ingest_pb2,
    ingest_pb2_grpc,
    watermark_pb2,
    watermark_pb2_grpc,
)
from tests.support import InjectorProcess, NodeProcess, free_port

STAGES = ("stage1", "stage2", "stage3")


SAMPLE_EVERY_S = 0.02


SEND_EVERY_S = 0.01


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
    injector = InjectorProcess(deployment, work / "log", work / "injector.log", log_level="WARNING")
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
