"""A cluster whose ``counts`` intervals move while records flow (issue 34's tests).

An injector, nodes of ``counts`` (two intervals by default), a node of ``totals`` and
a ``millrace sink`` on loopback, as real processes; :class:`Ingest` ingests batches
in a thread the whole time and checks the sink against the exact per-window totals
at the end; :class:`LeaseWatch` checks every lease the injector shows (one node per
epoch, epochs only rising).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from millrace.computations import IntervalId
from millrace.injector.client import IngestClient
from millrace.sinks import read_sink_file
from millrace.wire.v1 import control_pb2, control_pb2_grpc
from tests.support.cluster import (
    ROOT,
    InjectorProcess,
    MillraceChild,
    NodeProcess,
    SinkProcess,
    chaos_rng,
    free_port,
)
from tests.support.waiting import wait_until
from tests.support.watermarks import published_watermarks
from tests.workloads import expected_totals, totals_from_outputs, two_stage_topology_toml

WINDOW_MS = 2_000
KEYS = 60
BATCH = 200


@dataclass
class Cluster:
    deployment: Path
    injector_address: str
    processes: dict[str, MillraceChild]
    sink: SinkProcess

    def move(self, computation: str, interval: int, to: str, *, wait: bool = True) -> str:
        """``millrace intervals move`` as a user runs it; its output."""
        args = [
            "intervals", "move", "--computation", computation,
            "--interval", str(interval), "--to", to, "--wait-s", "120",
        ]  # fmt: skip
        return self.run(*args, *([] if wait else ["--no-wait"]))

    def split(self, computation: str, interval: int, *, wait: bool = True) -> str:
        """``millrace intervals split`` as a user runs it; its output."""
        args = [
            "intervals", "split", "--computation", computation,
            "--interval", str(interval), "--wait-s", "120",
        ]  # fmt: skip
        return self.run(*args, *([] if wait else ["--no-wait"]))

    def merge(self, computation: str, interval: int, *, wait: bool = True) -> str:
        """``millrace intervals merge`` as a user runs it; its output."""
        args = [
            "intervals", "merge", "--computation", computation,
            "--interval", str(interval), "--wait-s", "120",
        ]  # fmt: skip
        return self.run(*args, *([] if wait else ["--no-wait"]))

    def run(self, *args: str) -> str:
        """``millrace ARGS --config DEPLOYMENT`` as a user runs it; its output (it must
        exit 0)."""
        command = [sys.executable, "-m", "millrace", *args, "--config", str(self.deployment)]
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, timeout=400, check=False
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        return done.stdout

    def holder(self, computation: str, interval: int) -> str | None:
        """The node the interval's lease names (None: none, or the injector is down)."""
        return self.holders(computation).get(interval)

    def holders(self, computation: str) -> dict[int, str]:
        """Each interval's lease holder ({}: the injector is down)."""
        return lease_holders(self.injector_address, computation)

    def layout(self) -> control_pb2.Layout:
        """The injector's ``Control.GetLayout``."""
        with grpc.insecure_channel(self.injector_address) as channel:
            stub = control_pb2_grpc.ControlStub(channel)
            layout: control_pb2.Layout = stub.GetLayout(control_pb2.GetLayoutRequest(), timeout=5)
            return layout


def lease_holders(injector_address: str, computation: str) -> dict[int, str]:
    """Each interval of ``computation`` -> the node its lease names ({}: the injector is
    down)."""
    try:
        with grpc.insecure_channel(injector_address) as channel:
            stub = control_pb2_grpc.ControlStub(channel)
            leases = stub.GetAssignment(control_pb2.GetAssignmentRequest(), timeout=5).leases
    except grpc.RpcError:
        return {}
    return {
        lease.interval.index: str(lease.node_id)
        for lease in leases
        if lease.interval.computation == computation
    }


def deployment_file(
    tmp_path: Path,
    placements: Mapping[str, Sequence[int]] | None = None,
    *,
    intervals: int = 2,
    extra: str = "",
) -> tuple[Path, dict[str, str]]:
    """``placements``: each ``counts`` node's intervals (default ``counts-0`` [0],
    ``counts-1`` [1]); ``extra``: more TOML (a ``[rebalance]`` table)."""
    placed = placements or {"counts-0": [0], "counts-1": [1]}
    (tmp_path / "topology.toml").write_text(two_stage_topology_toml(WINDOW_MS, (intervals, 1)))
    at = {name: f"127.0.0.1:{free_port()}" for name in ("injector", *placed, "t", "sink")}
    nodes = "".join(
        f"""
[nodes.{name}]
computation = "counts"
intervals = {list(indexes)}
address = "{at[name]}"
"""
        for name, indexes in placed.items()
    )
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"

[injector]
address = "{at["injector"]}"
{nodes}
[nodes.totals]
computation = "totals"
intervals = [0]
address = "{at["t"]}"

[sinks.window_totals]
address = "{at["sink"]}"
{extra}
"""
    )
    return path, at


@contextmanager
def running_cluster(tmp_path: Path, deployment: Path, at: Mapping[str, str]) -> Iterator[Cluster]:
    """Every process of ``deployment`` started (killed at the end)."""
    sink = SinkProcess(deployment, "window_totals", tmp_path / "out.jsonl", tmp_path / "sink.log")
    processes: dict[str, MillraceChild] = {
        "injector": InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log"),
        "sink": sink,
    }
    names = [name for name in at if name.startswith("counts-")]
    for name in (*names, "totals"):
        processes[name] = NodeProcess(deployment, name, tmp_path / name, tmp_path, log_level="INFO")
    try:
        for process in processes.values():
            process.start()
        yield Cluster(deployment, at["injector"], processes, sink)
    finally:
        for process in processes.values():
            process.kill()


@dataclass
class Ingest:
    """Ingests batches in a thread until stopped; remembers every event."""

    cluster: Cluster
    events: list[tuple[bytes, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._rng = chaos_rng(34)
        self._client = IngestClient(self.cluster.injector_address, timeout_s=5)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def batch(self) -> None:
        start = len(self.events)
        t0 = 1_700_000_000_000
        batch = [
            (f"k{self._rng.randrange(KEYS)}".encode(), t0 + (start + i) * 5) for i in range(BATCH)
        ]
        rows = [(key, b"1", ts) for key, ts in batch]
        self._client.ingest("events", rows, idempotency_key=f"b{start}", give_up_after_s=300)
        self.events.extend(batch)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.batch()

    def __enter__(self) -> Ingest:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(300)

    def finish_and_check(self) -> None:
        for _ in range(3):
            self.batch()
        self._client.finish("events", give_up_after_s=300)
        expected = expected_totals(self.events, WINDOW_MS)

        def found() -> dict[int, dict[str, int]]:
            lines = read_sink_file(self.cluster.sink.path)
            return totals_from_outputs(json.dumps(line["value"]).encode() for line in lines)

        wait_until(lambda: len(found()) >= len(expected), 240, "every window at the sink")
        time.sleep(1.0)  # anything written twice would show up now
        assert found() == expected, "the sink differs from the exact totals"


class LeaseWatch(threading.Thread):
    """Every lease the injector shows and every watermark it publishes, every 0.1 s: one
    node per epoch, epochs rising, watermarks never going back."""

    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        self._address = address
        self.owners: defaultdict[tuple[str, int, int], set[str]] = defaultdict(set)
        self.regressions: list[str] = []
        self.watermarks_back: list[str] = []
        self.published: dict[str, int] = {}
        """The newest watermark seen published, per name."""
        self._done = threading.Event()

    def run(self) -> None:
        newest: dict[IntervalId, int] = {}
        published = self.published
        while not self._done.wait(0.1):
            try:
                with grpc.insecure_channel(self._address) as channel:
                    stub = control_pb2_grpc.ControlStub(channel)
                    leases = stub.GetAssignment(control_pb2.GetAssignmentRequest(), timeout=1)
                marks = published_watermarks(self._address, timeout_s=1)
            except grpc.RpcError:
                continue
            for lease in leases.leases:
                key = IntervalId(lease.interval.computation, lease.interval.index)
                self.owners[(*key, lease.epoch)].add(lease.node_id)
                if lease.epoch < newest.get(key, 0):
                    self.regressions.append(f"{key}: {newest[key]} -> {lease.epoch}")
                newest[key] = max(newest.get(key, 0), lease.epoch)
            for name, mark in marks.items():
                if mark < published.get(name, mark):
                    self.watermarks_back.append(f"{name}: {published[name]} -> {mark}")
                published[name] = max(published.get(name, mark), mark)

    def check(self) -> None:
        self._done.set()
        self.join(10)
        assert self.regressions == [], "an epoch went back"
        doubles = {at: nodes for at, nodes in self.owners.items() if len(nodes) > 1}
        assert doubles == {}, "two owners of an interval under one epoch"
        assert self.owners and self.published, "the watch saw no lease or no watermark"
        assert self.watermarks_back == [], "a published watermark went back"
