"""Invariant: no record ever arrives behind its computation's published input watermark,
while the injector (the watermark authority) is SIGKILLed at random points.

``events -> relay (4) -> mid -> middle (2, slow) -> mid2 -> audit (2, slow) -> out``,
every process real. Records come in bursts, so the stages drain between them
and every burst creates new holds (oldest work moving earlier: productions not
yet acknowledged downstream); the slow stages keep them for a while, and the
injector is killed, and kept down for a moment, at random points of that. Event
times only increase and the source never goes idle, so the source itself
delivers nothing late; each stage (``tests.workloads:LatenessAudit``) reports
any record whose event time is below its input watermark on stream ``late``.
That stream must stay empty, and ``out`` must hold every record exactly once.

Before issue 14's fix a restarted authority restored each interval's last
journaled report, and a node acked even when its report of a new hold had
failed (the authority was down): such a hold was forgotten, and a downstream
watermark passed records still in flight.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from millrace.injector.client import IngestClient
from tests.support import (
    CollectingSink,
    InjectorProcess,
    NodeProcess,
    chaos_kills,
    chaos_rng,
    free_port,
)
from tests.support.watermarks import wait_for_watermarks

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("MILLRACE_WATERMARK_KILLS", chaos_kills(12)))
"""Injector kills per run (CI's bounded default; the issue's hunt used 40)."""
BATCH = 100
OUT_OF_ORDERNESS_MS = 200


def write_deployment(tmp_path: Path, ports: dict[str, int], out: str, late: str) -> Path:
    (tmp_path / "topology.toml").write_text(
        """
[streams.events]
[streams.mid]
[streams.mid2]
[streams.out]
[streams.late]
[computations.relay]
handler = "tests.workloads:LatenessAudit"
intervals = 4
inputs = { events = "key" }
outputs = ["mid", "late"]
params = { stage = "relay", output = "mid" }
[computations.middle]
handler = "tests.workloads:LatenessAudit"
intervals = 2
inputs = { mid = "key" }
outputs = ["mid2", "late"]
params = { stage = "middle", output = "mid2", delay_ms = 0.1 }
[computations.audit]
handler = "tests.workloads:LatenessAudit"
intervals = 2
inputs = { mid2 = "key" }
outputs = ["out", "late"]
params = { stage = "audit", output = "out", delay_ms = 0.2 }
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "127.0.0.1:{ports["injector"]}"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = {OUT_OF_ORDERNESS_MS}
idle_timeout_ms = 600000
[nodes.relay-a]
computation = "relay"
intervals = [0, 1]
address = "127.0.0.1:{ports["relay-a"]}"
[nodes.relay-b]
computation = "relay"
intervals = [2, 3]
address = "127.0.0.1:{ports["relay-b"]}"
[nodes.middle]
computation = "middle"
intervals = [0, 1]
address = "127.0.0.1:{ports["middle"]}"
[nodes.audit]
computation = "audit"
intervals = [0, 1]
address = "127.0.0.1:{ports["audit"]}"
[sinks.out]
address = "{out}"
[sinks.late]
address = "{late}"
"""
    )
    return deployment


def test_no_record_arrives_behind_its_input_watermark_across_injector_kills(
    tmp_path: Path,
) -> None:
    rng = chaos_rng(14)
    out, late = CollectingSink(), CollectingSink()
    ports = {name: free_port() for name in ("injector", "relay-a", "relay-b", "middle", "audit")}
    deployment = write_deployment(tmp_path, ports, out.address, late.address)
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    names = ("relay-a", "relay-b", "middle", "audit")
    nodes = [NodeProcess(deployment, n, tmp_path / "data", tmp_path) for n in names]
    injector.start()
    for node in nodes:
        node.start()
    stop = threading.Event()
    sent = [0]

    def feed() -> None:
        """Bursts of records, event time = record number: it only increases, so the
        source is never late; the pauses between bursts let the stages drain."""
        client = IngestClient(f"127.0.0.1:{ports['injector']}", timeout_s=5)
        number = 0
        while not stop.is_set():
            for _ in range(rng.randrange(5, 20)):
                records = [
                    (f"k{rng.randrange(64)}".encode(), str(n).encode(), n)
                    for n in range(number, number + BATCH)
                ]
                client.ingest("events", records, idempotency_key=f"batch-{number}")
                number += BATCH
                sent[0] = number
            time.sleep(rng.uniform(0.05, 0.4))
        client.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.5))
            injector.kill()
            time.sleep(rng.uniform(0.0, 0.8))  # node-to-node traffic goes on meanwhile
            injector.start()
        time.sleep(1.0)
        stop.set()
        feeder.join(120)
        assert not feeder.is_alive(), "the feeder finished its last batch"
        total = sent[0]
        deadline = time.monotonic() + 180
        while len(out.records) < total and time.monotonic() < deadline:
            time.sleep(0.2)
        reports = [json.loads(value) for value in late.values()]
        assert reports == [], f"{len(reports)} records arrived behind the watermark: {reports[:5]}"
        assert sorted(int(v) for v in out.values()) == list(range(total)), "each record once"
        # Liveness (issue 30): with the input stopped and everything delivered, every
        # published watermark reaches what the last event allows, within a bound.
        final = total - 1 - OUT_OF_ORDERNESS_MS
        watched = ["source:events", "relay", "middle", "audit"]
        marks = wait_for_watermarks(f"127.0.0.1:{ports['injector']}", watched, final, 30)
        assert all(marks.get(name, final - 1) >= final for name in watched), (final, marks)
    finally:
        stop.set()
        for node in nodes:
            node.terminate()
        injector.terminate()
        out.stop()
        late.stop()
