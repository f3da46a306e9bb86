"""A real two-stage pipeline for the bad-input tests: injector, ``up``, ``down``, a sink.

``in -> up (tests.workloads:Forward) -> mid -> down (Forward) -> out -> sink``, every
service its own process on loopback, as ``millrace up`` runs it by default
(plaintext, no token). :meth:`Pipeline.legit_records_arrive` is what every test
checks after its bad input: records ingested afterwards reach the sink, each once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from millrace.injector.client import IngestClient
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc
from tests.support import CollectingSink, InjectorProcess, NodeProcess, free_port, wait_until


@dataclass
class Pipeline:
    tmp_path: Path
    deployment: Path
    injector: InjectorProcess
    nodes: dict[str, NodeProcess]
    sink: CollectingSink
    ports: dict[str, int]
    ingested: list[bytes] = field(default_factory=list)

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def ingest(self, count: int, *, prefix: str = "v") -> None:
        client = IngestClient(self.address("injector"), timeout_s=5)
        start = len(self.ingested)
        records = [
            (f"k{n % 5}".encode(), f"{prefix}{n}".encode(), 1_000 + n)
            for n in range(start, start + count)
        ]
        client.ingest("in", records, idempotency_key=f"{prefix}-{start}-{count}")
        client.close()
        self.ingested += [value for _, value, _ in records]

    def legit_records_arrive(self, timeout: float = 60.0) -> None:
        """Every record ingested so far is at the sink, once, and ``down`` counted each once."""
        expected = set(self.ingested)
        wait_until(lambda: set(self.sink.values()) == expected, timeout, "every record at the sink")
        assert len(self.sink.values()) == len(expected)
        assert self.counted("down") == len(expected), "each record counted once"

    def counted(self, node: str) -> int:
        total = 0
        with grpc.insecure_channel(self.address(node)) as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            for n in range(5):
                response = stub.GetState(
                    admin_pb2.GetStateRequest(computation=node, key=f"k{n}".encode()), timeout=10
                )
                total += sum(int(json.loads(e.value)) for e in response.entries if e.tag == "n")
        return total


@contextmanager
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    """Start the pipeline; stop everything after the block."""
    ports = {name: free_port() for name in ("injector", "up", "down")}
    sink = CollectingSink()
    (tmp_path / "topology.toml").write_text(
        """
[streams.in]
[streams.mid]
[streams.out]
[computations.up]
handler = "tests.workloads:Forward"
inputs = { in = "key" }
outputs = ["mid"]
params = { output = "mid" }
[computations.down]
handler = "tests.workloads:Forward"
inputs = { mid = "key" }
outputs = ["out"]
params = { output = "out" }
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "127.0.0.1:{ports["injector"]}"
[injector]
address = "127.0.0.1:{ports["injector"]}"
file_sources = {{ in = "incoming" }}
[nodes.up]
computation = "up"
intervals = [0]
address = "127.0.0.1:{ports["up"]}"
[nodes.down]
computation = "down"
intervals = [0]
address = "127.0.0.1:{ports["down"]}"
[sinks.out]
address = "{sink.address}"
"""
    )
    (tmp_path / "incoming").mkdir()
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    injector.start()
    nodes = {
        name: NodeProcess(deployment, name, tmp_path / "data", tmp_path, log_level="INFO")
        for name in ("up", "down")
    }
    for node in nodes.values():
        node.start()
    made = Pipeline(tmp_path, deployment, injector, nodes, sink, ports)
    try:
        yield made
    finally:
        for node in nodes.values():
            node.terminate()
        injector.terminate()
        sink.stop()
