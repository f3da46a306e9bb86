"""Issue 33: the pipeline spread over five test hosts under a nemesis, checked (Jepsen's shape).

Hosts (network namespaces, ``tests/support/hosts.py``): the injector, two nodes of
``counts`` (one interval each), a node of ``totals`` (both its intervals) and a
``millrace sink``. The test ingests the two-stage workload from outside the hosts while a
nemesis, on a random schedule, cuts a link both ways or one way, splits the hosts in
two, pauses a process for longer than a lease (SIGSTOP, SIGCONT), kills one (SIGKILL,
started again on its host), throttles a host's link or makes it lossy (a fifth of its
packets dropped at random), steps a host's wall clock forward or back by up to two
minutes, and heals each after a few seconds. Then everything is
healed, the stream is finished (its watermark goes to the end of time) and the checker
compares:

- the sink with the exact per-window totals (nothing lost, no window twice);
- every published watermark over time (never back);
- every lease seen (no interval under one epoch at two addresses);
- and it prints how long the pipeline took to make progress after each heal.

Each host's wall clock is off by its own offset (:data:`CLOCK_OFFSETS_MS`, from 95 s
behind to 70 s ahead, several times a lease): its processes read ``time.time`` through
``tests/support/host_clock/sitecustomize.py``, which reads the offset from a file per
host (so the nemesis can make it jump), a fake named as such: libfaketime
(Debian's 0.9.10), the usual tool, breaks Python's timed waits (``threading.Event.wait``
never returns when it fakes the monotonic clock, and sleeps fail with EINVAL when it
does not), which stalls any process, Millrace or not.

``MILLRACE_NEMESIS_S`` sets how long the nemesis runs (default 20 s, 12 s under CI;
``docs/faults.md`` has a 20-minute run); ``MILLRACE_CHAOS_SEED`` its schedule.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Self

import grpc
import pytest

from millrace.injector.client import IngestClient
from millrace.sinks import read_sink_file
from millrace.wire.v1 import control_pb2, control_pb2_grpc
from tests.support import (
    ROOT,
    InjectorProcess,
    MillraceChild,
    NodeProcess,
    SinkProcess,
    chaos_rng,
    wait_until,
)
from tests.support.hosts import HostsUnavailableError, TestHosts
from tests.support.watermarks import published_watermarks
from tests.workloads import expected_totals, totals_from_outputs, two_stage_topology_toml

pytestmark = pytest.mark.slow

HOSTS = ["injector", "counts-0", "counts-1", "totals", "sink"]
PORT = 7411
WINDOW_MS = 2_000
KEYS = 50
BATCH = 200
NEMESIS_S = float(os.environ.get("MILLRACE_NEMESIS_S", "12" if os.environ.get("CI") else "20"))
CLOCK_OFFSETS_MS = {"injector": 0, "counts-0": 70_000, "counts-1": -95_000, "totals": 4_000,
                    "sink": -30_000}  # fmt: skip
"""How far each host's wall clock is from the machine's (the injector's is right)."""
HOST_CLOCK = Path(__file__).resolve().parents[1] / "support" / "host_clock"


@dataclass
class Cluster:
    hosts: TestHosts
    processes: dict[str, MillraceChild]
    sink: SinkProcess
    started: dict[str, float]
    """When each process was started, by this process's clock."""
    clocks: dict[str, Path]
    """Each host's clock file: its wall clock's offset in ms (``sitecustomize.py``)."""

    def set_clock(self, host: str, offset_ms: int) -> None:
        """Step ``host``'s wall clock to ``offset_ms`` from the machine's (at once)."""
        path = self.clocks[host]
        written = path.with_suffix(".new")
        written.write_text(f"{offset_ms}\n")
        written.replace(path)  # atomic: a process reads the old offset or the new one

    def address(self, host: str) -> str:
        return f"{self.hosts.address(host)}:{PORT}"


def deployment_file(tmp_path: Path, hosts: TestHosts) -> Path:
    (tmp_path / "topology.toml").write_text(two_stage_topology_toml(WINDOW_MS))
    at = {name: f"{hosts.address(name)}:{PORT}" for name in HOSTS}
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
authority = "{at["injector"]}"

[security]
insecure = true  # the test hosts' own bridge, reached by nothing else

[injector]
address = "{at["injector"]}"

[nodes.counts-0]
computation = "counts"
intervals = [0]
address = "{at["counts-0"]}"

[nodes.counts-1]
computation = "counts"
intervals = [1]
address = "{at["counts-1"]}"

[nodes.totals]
computation = "totals"
intervals = [0, 1]
address = "{at["totals"]}"

[sinks.window_totals]
address = "{at["sink"]}"
"""
    )
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    try:
        hosts = TestHosts(HOSTS).__enter__()
    except HostsUnavailableError as exc:
        pytest.skip(f"no test hosts on this machine: {exc}")
    deployment = deployment_file(tmp_path, hosts)
    sink = SinkProcess(deployment, "window_totals", tmp_path / "out.jsonl", tmp_path / "sink.log")
    processes: dict[str, MillraceChild] = {
        "sink": sink,
        "injector": InjectorProcess(
            deployment, tmp_path / "log", tmp_path / "injector.log", log_level="INFO"
        ),
    }
    for name in ("counts-0", "counts-1", "totals"):
        processes[name] = NodeProcess(deployment, name, tmp_path / name, tmp_path, log_level="INFO")
    clocks = {name: tmp_path / f"{name}.clock" for name in processes}
    for name, process in processes.items():
        clocks[name].write_text(f"{CLOCK_OFFSETS_MS[name]}\n")
        process.prefix = hosts.prefix(name)
        process.env = {
            **process.env,
            "MILLRACE_DATA_DIR": str(tmp_path / f"{name}-data"),
            "MILLRACE_TEST_CLOCK_FILE": str(clocks[name]),
            "PYTHONPATH": os.pathsep.join([str(HOST_CLOCK), str(ROOT)]),
        }
    started: dict[str, float] = {}
    try:
        for name, process in processes.items():
            started[name] = time.time()
            process.start()
        yield Cluster(hosts, processes, sink, started, clocks)
    finally:
        for process in processes.values():
            if process.process is not None:
                process.process.send_signal(signal.SIGCONT)
                process.kill()
        hosts.__exit__()


class InThread:
    """``run`` in a thread of its own while the object is used as a context manager
    (stopped by setting ``_stop``)."""

    _stop: threading.Event

    def run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # the test fails with it when it ends
            self._failure = exc
            raise

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self._failure is not None and exc[0] is None:
            raise AssertionError(f"{type(self).__name__} failed") from self._failure


@dataclass
class Observer(InThread):
    """Polls the injector every 0.2 s: leases, published watermarks, the sink's progress."""

    cluster: Cluster
    owners: defaultdict[tuple[str, int, int], set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )
    regressions: list[str] = field(default_factory=list)
    progress: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        injector = self.cluster.address("injector")
        newest: dict[str, int] = {}
        while not self._stop.wait(0.2):
            try:
                with grpc.insecure_channel(injector) as channel:
                    stub = control_pb2_grpc.ControlStub(channel)
                    leases = stub.GetAssignment(control_pb2.GetAssignmentRequest(), timeout=1)
                for lease in leases.leases:
                    at = (lease.interval.computation, lease.interval.index, lease.epoch)
                    self.owners[at].add(lease.address)
                marks = published_watermarks(injector, timeout_s=1)
            except grpc.RpcError:
                continue  # the injector down or cut off from the test for now
            for name, mark in marks.items():
                if mark < newest.get(name, mark):
                    self.regressions.append(f"{name}: {newest[name]} -> {mark}")
                newest[name] = max(mark, newest.get(name, mark))
            if "totals" in newest:  # the pipeline's last stage: it moves when all of it does
                self.progress.append((time.monotonic(), newest["totals"]))

    def progress_after(self, at: float) -> float | None:
        """Seconds from ``at`` until the last stage's watermark moved past where it was."""
        before = max((total for t, total in self.progress if t <= at), default=None)
        for t, total in self.progress:
            if t > at and before is not None and total > before:
                return t - at
        return None


Fault = tuple[str, Callable[[], object]]
"""What a fault did, and how to heal it."""


def start_again(process: MillraceChild) -> None:
    """Start a killed process again (its port may take a moment to be free)."""
    for attempt in range(10):
        try:
            process.start()
            return
        except RuntimeError:
            if attempt == 9:
                raise
            time.sleep(0.5)


@dataclass
class Nemesis(InThread):
    """Random faults, each healed after a few seconds, until :meth:`stop`."""

    cluster: Cluster
    rng: random.Random
    heals: list[tuple[str, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        faults = [
            self._cut, self._one_way, self._split, self._pause, self._kill, self._slow,
            self._lossy, self._clock_jump,
        ]  # fmt: skip
        while not self._stop.wait(self.rng.uniform(0.5, 1.5)):
            fault = self.rng.choice(faults)
            kind, heal = fault()
            # A pause outlasts a lease (5 s): the paused owner must find it lost.
            self._stop.wait(6.5 if kind.startswith("pause") else self.rng.uniform(2.0, 4.0))
            heal()
            self.heals.append((kind, time.monotonic()))

    def _pair(self) -> tuple[str, str]:
        a, b = self.rng.sample(HOSTS, 2)
        return a, b

    def _cut(self) -> Fault:
        a, b = self._pair()
        self.cluster.hosts.cut(a, b)
        return f"cut {a}/{b}", self.cluster.hosts.heal

    def _one_way(self) -> Fault:
        a, b = self._pair()
        self.cluster.hosts.cut(a, b, one_way=True)
        return f"one way {a}->{b}", self.cluster.hosts.heal

    def _split(self) -> Fault:
        side = ["injector", *self.rng.sample(HOSTS[1:], 2)]
        self.cluster.hosts.split(side)
        return f"split {'+'.join(side)}", self.cluster.hosts.heal

    def _pause(self) -> Fault:
        name = self.rng.choice(["injector", "counts-0", "counts-1", "totals"])
        process = self.cluster.processes[name].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        return f"pause {name}", lambda: process.send_signal(signal.SIGCONT)

    def _kill(self) -> Fault:
        name = self.rng.choice(HOSTS)
        victim = self.cluster.processes[name]
        victim.kill()
        return f"kill {name}", lambda: start_again(victim)

    def _slow(self) -> Fault:
        name = self.rng.choice(HOSTS)
        self.cluster.hosts.slow(name, rate_kbit=512)
        return f"slow {name}", lambda: self.cluster.hosts.unslow(name)

    def _lossy(self) -> Fault:
        name = self.rng.choice(HOSTS)
        self.cluster.hosts.lose(name, percent=20)
        return f"lossy {name}", lambda: self.cluster.hosts.unlose(name)

    def _clock_jump(self) -> Fault:
        name = self.rng.choice(HOSTS)
        step_ms = self.rng.choice([-1, 1]) * self.rng.randrange(20_000, 120_000)
        self.cluster.set_clock(name, CLOCK_OFFSETS_MS[name] + step_ms)
        return (
            f"clock {name} {step_ms / 1000:+.0f} s",
            lambda: self.cluster.set_clock(name, CLOCK_OFFSETS_MS[name]),
        )

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.cluster.hosts.heal()
        for name in HOSTS:
            self.cluster.set_clock(name, CLOCK_OFFSETS_MS[name])


def logged_clock_offset_s(cluster: Cluster, name: str) -> float:
    """How far ahead of this process's clock a child's first log line says it started
    (a child's log times are its own clock's)."""
    first = cluster.processes[name].log_path.read_text().splitlines()[0]
    logged = datetime.strptime(first[:23], "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()
    return logged - cluster.started[name]


def test_the_pipeline_on_five_hosts_under_a_nemesis_loses_and_doubles_nothing(
    cluster: Cluster,
) -> None:
    for name in ("counts-0", "counts-1", "totals"):  # the hosts' clocks are their own
        offset = logged_clock_offset_s(cluster, name)
        assert abs(offset - CLOCK_OFFSETS_MS[name] / 1000) < 10, (name, offset)
    rng = chaos_rng(33)
    client = IngestClient(cluster.address("injector"), timeout_s=5)
    events: list[tuple[bytes, int]] = []
    t0 = 1_700_000_000_000

    def ingest(batches: int) -> None:
        for _ in range(batches):
            start = len(events)
            batch = [
                (f"k{rng.randrange(KEYS)}".encode(), t0 + (start + i) * 5) for i in range(BATCH)
            ]
            rows = [(key, b"1", ts) for key, ts in batch]
            client.ingest("events", rows, idempotency_key=f"b{start}", give_up_after_s=300)
            events.extend(batch)

    with Observer(cluster) as observer:
        ingest(5)
        with Nemesis(cluster, rng) as nemesis:
            deadline = time.monotonic() + NEMESIS_S
            while time.monotonic() < deadline:
                ingest(1)
                time.sleep(0.05)
        ingest(5)
        client.finish("events", give_up_after_s=300)
        expected = expected_totals(events, WINDOW_MS)

        def found() -> dict[int, dict[str, int]]:
            return totals_from_outputs(
                json.dumps(line["value"]).encode() for line in read_sink_file(cluster.sink.path)
            )

        wait_until(lambda: len(found()) >= len(expected), 240, "every window at the sink")
        time.sleep(1.0)  # anything written twice would show up now

    print(f"{len(events):,} events, {len(expected)} windows, {len(nemesis.heals)} faults healed")
    for kind, healed in nemesis.heals:
        took = observer.progress_after(healed)
        print(f"  {kind:<32} progress again after "
              f"{'never' if took is None else f'{took:.1f} s'}")  # fmt: skip
    assert found() == expected, "the sink differs from the exact totals"
    assert observer.regressions == [], "a published watermark went back"
    doubles = {at: addresses for at, addresses in observer.owners.items() if len(addresses) > 1}
    assert doubles == {}, "two owners of an interval under one epoch"
    assert nemesis.heals, "the nemesis made no fault"
