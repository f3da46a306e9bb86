"""What both injector benchmarks run on: the injector as a child process, a counting
sink in this process, the deployment file, a client channel, clocks."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from millrace.wire.v1 import delivery_pb2
from tests.support import CollectingSink

ROOT = Path(__file__).resolve().parent.parent

VALUE_BYTES = 100
KEYS = 64
OUT_OF_ORDERNESS_MS = 1_000
IDLE_TIMEOUT_MS = 60_000


def now_ms() -> int:
    """Wall clock, ms since the Unix epoch (the clock event times and watermarks use)."""
    return time.time_ns() // 1_000_000


def self_cpu_s() -> float:
    """CPU seconds this benchmark process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
