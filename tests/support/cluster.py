"""Real-process cluster helpers for tests and benchmarks.

- :class:`CollectingSink`: a ``Delivery`` server that keeps sink records by
  record id (exactly-once on its side: a resent production is a duplicate).
- :class:`NodeProcess`: ``millrace node`` as a child process that can be
  SIGKILLed and restarted.
- :class:`SourceDriver`: feeds records to the first computation through the
  real :class:`DownstreamSender`, keeps every record until it is acked and
  holds the source watermark at the oldest unacked record.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from examples.clickstream import demo
from millrace.computations import IntervalId, Topology
from millrace.delivery import Origin, SenderPool
from millrace.engine import Production, routes_of, source_productions
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2

ROOT = Path(__file__).resolve().parents[2]


def chaos_kills(full: int) -> int:
    """How many kills a chaos test makes: ``full`` times ``MILLRACE_CHAOS_SCALE`` (default
    1, and 0.4 under CI, which sets ``CI``: a bounded run that keeps the suite within its
    time budget), at least 5. A hunt for failures sets it higher."""
    default = "0.4" if os.environ.get("CI") else "1"
    return max(5, round(full * float(os.environ.get("MILLRACE_CHAOS_SCALE", default))))


def chaos_rng(default_seed: int) -> random.Random:
    """The random source of a chaos test: ``MILLRACE_CHAOS_SEED`` if set (to hunt for
    failures with other kill schedules), else the test's own fixed seed."""
    seed = int(os.environ.get("MILLRACE_CHAOS_SEED", default_seed))
    print(f"chaos seed {seed}")  # pytest shows it with a failure's captured output
    return random.Random(seed)


def alive(pid: int) -> bool:
    """True while process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    """A free loopback port not yet handed out in this process: the demo's own
    :func:`~examples.clickstream.demo.free_port`, so tests that run both share one book."""
    return demo.free_port()


def stop_gracefully(process: subprocess.Popen[str], log_path: Path, timeout: float = 30.0) -> None:
    """SIGTERM and reap; a process still running after ``timeout`` has its thread stacks
    dumped into its log (SIGUSR1, ``enable_stack_dumps``), is killed, and fails the test."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        process.kill()
        process.wait()
        tail = log_path.read_text(errors="replace")[-6000:] if log_path.exists() else ""
        raise AssertionError(
            f"pid {process.pid} ignored SIGTERM for {timeout} s; its log ends:\n{tail}"
        ) from None


def forwarding_deployment(
    directory: Path,
    node_port: int,
    sink_address: str,
    sink_settings: str = "",
    computation_settings: str = "",
) -> Path:
    """Write a one-node topology (``tests.workloads:Poison`` forwarding stream ``in`` to
    sink stream ``ok``) and its deployment file into ``directory``; return the latter.
    ``sink_settings``, ``computation_settings``: extra TOML lines of ``[sinks.ok]``
    (``path``, ``format``) and of ``[computations.fwd]`` (``productions``, ...)."""
    (directory / "topology.toml").write_text(
        f"""
[streams.in]
[streams.ok]
[computations.fwd]
handler = "tests.workloads:Poison"
inputs = {{ in = "key" }}
outputs = ["ok"]
{computation_settings}
"""
    )
    deployment = directory / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{node_port}"
[sinks.ok]
address = "{sink_address}"
{sink_settings}
"""
    )
    return deployment


def numbered_records(start: int, count: int, keys: int) -> list[record_pb2.Record]:
    """Records ``start`` .. ``start + count - 1`` of stream ``in``: id ``r<n>``, key
    ``k<n % keys>``, value and event time ``n``."""
    return [
        record_pb2.Record(
            record_id=f"r{i:06d}".encode(), key=f"k{i % keys}".encode(),
            value=json.dumps(i).encode(), event_time_ms=i, stream="in",
        )
        for i in range(start, start + count)
    ]  # fmt: skip


def jittered_records(
    rng: random.Random, count: int, *, keys: int, bound_ms: int, step_ms: int = 1
) -> list[record_pb2.Record]:
    """``count`` records of stream ``events`` from the source: record ``i`` has key
    ``user<random below keys>`` and event time ``i * step_ms`` moved back by less than
    ``bound_ms`` (never below 0), so none is behind a watermark held ``bound_ms`` under
    the newest time sent."""
    return [
        record_pb2.Record(
            record_id=i.to_bytes(16, "big"), key=f"user{rng.randrange(keys)}".encode(),
            value=b"", event_time_ms=max(0, i * step_ms - rng.randrange(bound_ms)),
            stream="events", producer="source",
        )
        for i in range(count)
    ]  # fmt: skip


class DeliveryEndpoint(delivery_pb2_grpc.DeliveryServicer):
    """A ``Delivery`` server of the test's own on a loopback port (subclasses answer)."""

    def __init__(self, *, max_workers: int = 8) -> None:
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
        delivery_pb2_grpc.add_DeliveryServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(0.5).wait()


class CollectingSink(DeliveryEndpoint):
    """A sink endpoint: stores each record once, acks everything."""

    def __init__(self) -> None:
        self.records: dict[bytes, record_pb2.Record] = {}
        self.deliveries = 0
        super().__init__()

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            ack = delivery_pb2.DeliveryAck(batch_seq=batch.batch_seq)
            with self._lock:
                self.deliveries += len(batch.records)
                for record in batch.records:
                    if record.record_id in self.records:
                        ack.duplicate_ids.append(record.record_id)
                    else:
                        self.records[record.record_id] = record
                        ack.committed_ids.append(record.record_id)
            yield ack

    def values(self) -> list[bytes]:
        with self._lock:
            return [r.value for r in self.records.values()]


class MillraceChild:
    """A ``millrace`` sub-command run as a child process that prints a ready line first;
    its stderr goes to ``log_path``."""

    def __init__(self, log_path: Path, *, log_level: str | None = None) -> None:
        self.log_path = log_path
        self._log_level = log_level
        self.process: subprocess.Popen[str] | None = None
        self.env: dict[str, str] = {}
        """Extra environment of the child (e.g. ``LD_PRELOAD`` of libfaketime)."""
        self.prefix: list[str] = []
        """A command the child runs under (e.g. ``ip netns exec HOST``: a test host)."""

    def start(self) -> None:
        """Start the child and wait for its ready line."""
        raise NotImplementedError

    @property
    def pid(self) -> int:
        """The child's process id."""
        assert self.process is not None
        return self.process.pid

    def _spawn(self, args: list[str], ready_prefix: str, what: str) -> None:
        """Start ``millrace ARGS`` and wait for a stdout line starting with ``ready_prefix``."""
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, **self.env}
        if self._log_level:
            env["MILLRACE_LOG_LEVEL"] = self._log_level
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "millrace", *args],
                stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, env=env,
            )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(ready_prefix):
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"{what} did not start: {line!r}; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def terminate(self) -> None:
        """SIGTERM (graceful drain) and reap; see :func:`stop_gracefully`."""
        if self.process is not None:
            stop_gracefully(self.process, self.log_path)


class InjectorProcess(MillraceChild):
    """One ``millrace injector`` child process; also a context manager (start, then a
    graceful stop that must exit 0 unless the block raised)."""

    def __init__(
        self, deployment: Path, log_dir: Path, log_path: Path, *, log_level: str | None = None
    ) -> None:
        super().__init__(log_path, log_level=log_level)
        self._args = ["injector", "--deployment", str(deployment), "--log-dir", str(log_dir)]

    def start(self) -> None:
        """Start and wait for the ``injector serving`` line."""
        self._spawn(self._args, "injector serving", "injector")

    def __enter__(self) -> InjectorProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        self.terminate()
        if exc_type is None:
            assert self.process is not None
            assert self.process.returncode == 0, f"injector exit {self.process.returncode}"


class NodeProcess(MillraceChild):
    """One ``millrace node`` child process (logging at WARNING)."""

    def __init__(
        self,
        deployment: Path,
        name: str,
        data_dir: Path,
        log_dir: Path,
        *,
        address: str | None = None,
        log_level: str = "WARNING",
        metrics_port: int | None = None,
    ) -> None:
        super().__init__(log_dir / f"{name}.log", log_level=log_level)
        self.deployment = deployment
        self.name = name
        self.data_dir = data_dir
        self.address = address
        """``--address`` (where to listen), when not the placement's."""
        self.metrics_port = metrics_port
        """``--metrics-port``, when not the placement's."""
        self.starts = 0

    def start(self) -> None:
        """Start and wait for the node's ready line."""
        self.starts += 1
        args = [
            "node", "--deployment", str(self.deployment),
            "--name", self.name, "--data-dir", str(self.data_dir),
        ]  # fmt: skip
        if self.address is not None:
            args += ["--address", self.address]
        if self.metrics_port is not None:
            args += ["--metrics-port", str(self.metrics_port)]
        self._spawn(args, f"node {self.name} serving", f"node {self.name}")

    def pause(self) -> None:
        """SIGSTOP: the process keeps its locks and its port but does nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


class SinkProcess(MillraceChild):
    """One ``millrace sink`` child process (an exactly-once JSON-lines file)."""

    def __init__(self, deployment: Path, stream: str, path: Path, log_path: Path) -> None:
        super().__init__(log_path)
        self.path = path
        self._args = ["sink", "--deployment", str(deployment), "--stream", stream]
        self._args += ["--path", str(path)]

    def start(self) -> None:
        """Start and wait for the ``sink ... serving`` line."""
        self._spawn(self._args, "sink ", "sink")


class SourceDriver:
    """The source of a test topology: sends records, retries until acked, holds the watermark."""

    def __init__(self, topology: Topology, stream: str, addresses: dict[IntervalId, str]) -> None:
        self._topology = topology
        self._stream = stream
        self._addresses = addresses
        self._lock = threading.Lock()
        self._unacked: dict[bytes, int] = {}  # outbox key -> event time
        self.max_sent_ms: int | None = None
        self._senders = SenderPool(sender_id="source", callbacks=self)
        self._origin = Origin("", 0, 0)

    def send(self, records: list[record_pb2.Record]) -> None:
        """Queue records for every consumer of the stream (blocks under backpressure)."""
        by_address: dict[str, list[Production]] = {}
        routes = routes_of(self._topology, self._stream)
        with self._lock:
            for record in records:
                for production in source_productions(routes, record):
                    self._unacked[production.outbox_key] = record.event_time_ms
                    address = self._addresses[IntervalId(production.consumer, production.interval)]
                    by_address.setdefault(address, []).append(production)
                if self.max_sent_ms is None or record.event_time_ms > self.max_sent_ms:
                    self.max_sent_ms = record.event_time_ms
        for address, items in by_address.items():
            self._senders.get(address).submit(self._origin, items)

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        with self._lock:
            for key in outbox_keys:
                self._unacked.pop(key, None)

    def fenced(self, origin: Origin, message: str) -> None:
        raise AssertionError(f"the source was fenced: {message}")

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        raise AssertionError(f"a source record was refused: {message}")

    def oldest_unacked(self) -> int | None:
        with self._lock:
            return min(self._unacked.values()) if self._unacked else None

    def unacked(self) -> int:
        with self._lock:
            return len(self._unacked)

    def watermark(self, bound_ms: int) -> int | None:
        """max sent - bound, held back by the oldest unacknowledged record."""
        with self._lock:
            if self.max_sent_ms is None:
                return None
            mark = self.max_sent_ms - bound_ms
            if self._unacked:
                mark = min(mark, *self._unacked.values())
            return mark

    def stop(self) -> None:
        self._senders.stop()
