"""Exactly-once under SIGKILL: two stages as real node processes over real gRPC.

``events -> counts (2 intervals, 2 processes) -> window_counts -> totals
(2 intervals, 1 process) -> window_totals -> sink``. The test process plays
the injector (source with a bounded out-of-order watermark, resending until
acked) and hosts the watermark authority and the sink. It feeds 200,000
records, some delivered twice on purpose, while SIGKILLing random nodes at
random moments and restarting them. When everything is acked and the source
watermark passes the last window, the sink must hold exactly the oracle's
per-window totals: nothing lost, nothing doubled.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from millrace.computations import MAX_TIME, IntervalId
from millrace.injector.authority_service import create_authority_server
from millrace.injector.watermark_authority import WatermarkAuthority
from tests.support import (
    CollectingSink,
    NodeProcess,
    SourceDriver,
    chaos_kills,
    chaos_rng,
    free_port,
    jittered_records,
    wait_quiescent,
    wait_until,
)
from tests.workloads import (
    expected_totals,
    totals_from_outputs,
    two_stage_topology,
    two_stage_topology_toml,
)

pytestmark = pytest.mark.slow

RECORDS = 200_000
KEYS = 100
WINDOW_MS = 10_000
STEP_MS = 1  # event time advances 1 ms per record: 200 s of event time, 20 windows
BOUND_MS = 2_000  # out-of-orderness of the generated timestamps
DUPLICATE_RATE = 0.02
MIN_KILLS = chaos_kills(20)


def topology_files(tmp_path: Path, sink: str, authority: str, ports: dict[str, int]) -> Path:
    (tmp_path / "topology.toml").write_text(two_stage_topology_toml(WINDOW_MS))
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "{authority}"

[nodes.counts-0]
computation = "counts"
intervals = [0]
address = "127.0.0.1:{ports["counts-0"]}"

[nodes.counts-1]
computation = "counts"
intervals = [1]
address = "127.0.0.1:{ports["counts-1"]}"

[nodes.totals]
computation = "totals"
intervals = [0, 1]
address = "127.0.0.1:{ports["totals"]}"

[sinks.window_totals]
address = "{sink}"
"""
    )
    return deployment


def test_two_stage_outputs_are_exact_under_sigkill(tmp_path: Path) -> None:
    rng = chaos_rng(20261122)
    topology = two_stage_topology((2, 2), window_ms=WINDOW_MS)
    authority = WatermarkAuthority(topology)
    authority_server, authority_port = create_authority_server(authority, "127.0.0.1:0")
    sink = CollectingSink()
    ports = {name: free_port() for name in ("counts-0", "counts-1", "totals")}
    deployment = topology_files(tmp_path, sink.address, f"127.0.0.1:{authority_port}", ports)
    nodes = {name: NodeProcess(deployment, name, tmp_path / "data", tmp_path) for name in ports}
    for node in nodes.values():
        node.start()
    driver = SourceDriver(
        topology,
        "events",
        {
            IntervalId("counts", 0): f"127.0.0.1:{ports['counts-0']}",
            IntervalId("counts", 1): f"127.0.0.1:{ports['counts-1']}",
        },
    )
    records = jittered_records(rng, RECORDS, keys=KEYS, bound_ms=BOUND_MS, step_ms=STEP_MS)
    done_feeding = threading.Event()
    stop = threading.Event()

    def advance_source_watermark() -> None:
        while not stop.wait(0.05):
            mark = driver.watermark(BOUND_MS)
            if mark is not None:
                authority.set_source_watermark("events", mark)

    kills = [0]

    def chaos() -> None:
        while not stop.is_set() and (kills[0] < MIN_KILLS or not done_feeding.is_set()):
            time.sleep(rng.uniform(0.1, 0.6))
            victim = nodes[rng.choice(sorted(nodes))]
            victim.kill()
            kills[0] += 1
            victim.start()

    threads = [
        threading.Thread(target=advance_source_watermark, daemon=True),
        threading.Thread(target=chaos, daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        duplicates = 0
        for start in range(0, RECORDS, 2_000):
            chunk = records[start : start + 2_000]
            driver.send(chunk)
            resend = [r for r in chunk if rng.random() < DUPLICATE_RATE]
            duplicates += len(resend)
            driver.send(resend)
        done_feeding.set()
        wait_until(lambda: driver.unacked() == 0, 300, "every source record to be acked")
        threads[1].join(300)
        assert kills[0] >= MIN_KILLS
        stop.set()
        threads[0].join()
        authority.set_source_watermark("events", MAX_TIME - 1)
        expected = expected_totals((r.key, r.event_time_ms) for r in records)
        wait_until(lambda: len(sink.records) >= len(expected), 300, "every window to close")
        # Nothing left in flight and every timer fired: no later output can appear.
        wait_quiescent([f"127.0.0.1:{port}" for port in ports.values()], 120)
        assert duplicates > 1000
        assert totals_from_outputs(sink.values()) == expected
    finally:
        stop.set()
        driver.stop()
        for node in nodes.values():
            node.terminate()
        sink.stop()
        authority_server.stop(0.5).wait()
