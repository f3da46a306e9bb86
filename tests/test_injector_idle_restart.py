"""An idle source keeps advancing its watermark across injector restarts.

Windows must close without new input (the idle timeout); a restarted
injector that forgot the newest event time of its log would freeze the
source watermark until new data arrived. The clock here is the test's, the
log, gRPC and the journal are real; a ``CollectingSink`` stands in for the
first computation's node and acknowledges every delivery.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from millrace.deployment import Deployment
from millrace.injector.client import IngestClient
from millrace.injector.server import Injector, InjectorConfig
from tests.support import CollectingSink, ManualClock, free_port

pytestmark = pytest.mark.slow

IDLE_MS = 1_000


def write_deployment(tmp_path: Path, injector_port: int, node_address: str) -> Deployment:
    (tmp_path / "topology.toml").write_text(
        """
[streams.events]
[streams.out]
[computations.fwd]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["out"]
"""
    )
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{injector_port}"
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "{node_address}"
[sinks.out]
address = "{node_address}"
"""
    )
    return Deployment.load(path)


def source_mark(injector: Injector) -> int:
    return injector.authority.watermarks()["source:events"]


def wait_for_mark(injector: Injector, at_least: int) -> int:
    """The published source watermark once it reaches ``at_least`` (bounded wait)."""
    deadline = time.monotonic() + 15
    mark = source_mark(injector)
    while mark < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
        mark = source_mark(injector)
    return mark


def test_idle_source_advances_after_a_restart(tmp_path: Path) -> None:
    sink = CollectingSink()
    port = free_port()
    deployment = write_deployment(tmp_path, port, sink.address)
    clock = ManualClock(1_000_000)
    config = InjectorConfig(out_of_orderness_ms=0, idle_timeout_ms=IDLE_MS)

    def start() -> Injector:
        injector = Injector(
            deployment, tmp_path / "log", address=f"127.0.0.1:{port}", config=config, clock=clock
        )
        injector.start()
        return injector

    injector = start()
    try:
        client = IngestClient(f"127.0.0.1:{port}")
        client.ingest("events", [(b"k", b"v", 5_000 + i) for i in range(100)], idempotency_key="a")
        client.close()
        assert wait_for_mark(injector, 5_099) == 5_099, "max seen - 0 once acknowledged"
        clock.now_ms += IDLE_MS + 2_000
        before_restart = wait_for_mark(injector, 5_100 + 2_000)
        assert before_restart >= 5_100 + 2_000, "idle: event time follows the clock"
    finally:
        injector.stop()

    injector = start()
    try:
        assert source_mark(injector) >= before_restart, "never backwards across a restart"
        clock.now_ms += IDLE_MS + 3_000
        after = wait_for_mark(injector, before_restart + 3_000)
        assert after >= before_restart + 3_000, "still idle after the restart: it must advance"
    finally:
        injector.stop()
        sink.stop()
