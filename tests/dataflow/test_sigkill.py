"""A ``dataflow`` windowed aggregation across a real node process under SIGKILL.

``events -> agg (dataflow:WindowedAggregation, 2 intervals) -> panes -> sink``: the
test process is the source (resending until acked, some records twice), hosts the
watermark authority and the sink, and SIGKILLs and restarts the node while records
flow. Once everything is acked and the watermark passes the last window, the sink
holds exactly one on-time pane per key and window, equal to a batch count and sum
(the vectorized path: windows folded and panes written natively).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from millrace.computations import MAX_TIME, IntervalId, Topology
from millrace.dataflow import Pane, Timing, Tumbling, Window
from millrace.injector.authority_service import create_authority_server
from millrace.injector.watermark_authority import WatermarkAuthority
from tests.support import (
    CollectingSink,
    NodeProcess,
    SourceDriver,
    chaos_rng,
    free_port,
    jittered_records,
    wait_quiescent,
    wait_until,
)

pytestmark = pytest.mark.slow

RECORDS = 30_000
KEYS = 50
WINDOW_MS = 5_000
BOUND_MS = 1_000
KILLS = 5


def write_topology(tmp_path: Path) -> Topology:
    (tmp_path / "topology.toml").write_text(
        f"""
[streams.events]
[streams.panes]
[streams.late]

[computations.agg]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 2
inputs = {{ events = "key" }}
outputs = ["panes", "late"]
[computations.agg.params]
window = "tumbling:{WINDOW_MS}"
aggregate = "count+sum"
output = "panes"
late_output = "late"
"""
    )
    return Topology.load(tmp_path / "topology.toml")


def write_deployment(tmp_path: Path, sink: str, authority: str, port: int) -> Path:
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "{authority}"
[nodes.agg]
computation = "agg"
intervals = [0, 1]
address = "127.0.0.1:{port}"
[sinks.panes]
address = "{sink}"
[sinks.late]
address = "{sink}"
"""
    )
    return deployment


def test_windowed_counts_are_exact_across_sigkills(tmp_path: Path) -> None:
    rng = chaos_rng(20261124)
    sink = CollectingSink()
    port = free_port()
    topology = write_topology(tmp_path)
    authority = WatermarkAuthority(topology)
    server, authority_port = create_authority_server(authority, "127.0.0.1:0")
    deployment = write_deployment(tmp_path, sink.address, f"127.0.0.1:{authority_port}", port)
    node = NodeProcess(deployment, "agg", tmp_path / "data", tmp_path)
    node.start()
    driver = SourceDriver(
        topology, "events", {IntervalId("agg", i): f"127.0.0.1:{port}" for i in range(2)}
    )
    stop = threading.Event()

    def advance_watermark() -> None:
        while not stop.wait(0.05):
            mark = driver.watermark(BOUND_MS)
            if mark is not None:
                authority.set_source_watermark("events", mark)

    ticker = threading.Thread(target=advance_watermark, daemon=True)
    ticker.start()
    records = jittered_records(rng, RECORDS, keys=KEYS, bound_ms=BOUND_MS)
    for record in records:  # bare JSON integers: the native fold sums them
        record.value = str(rng.randrange(-50, 1_000)).encode()
    try:
        kill_at = sorted(rng.sample(range(1, RECORDS // 1_000), KILLS))
        for chunk, start in enumerate(range(0, RECORDS, 1_000)):
            batch = records[start : start + 1_000]
            driver.send(batch)
            driver.send([r for r in batch if rng.random() < 0.02])  # delivered twice
            if chunk in kill_at:
                time.sleep(rng.uniform(0.0, 0.3))
                node.kill()
                node.start()
        wait_until(lambda: driver.unacked() == 0, 180, "every record acked")
        stop.set()
        ticker.join()
        authority.set_source_watermark("events", MAX_TIME - 1)
        expected: dict[tuple[bytes, Window], dict[str, int]] = {}
        for r in records:
            window = Tumbling(WINDOW_MS).assign(r.event_time_ms)[0]
            totals = expected.setdefault((r.key, window), {"count": 0, "sum": 0})
            totals["count"] += 1
            totals["sum"] += int(r.value)
        wait_until(lambda: len(sink.records) >= len(expected), 120, "every window's pane")
        wait_quiescent([f"127.0.0.1:{port}"], 120)
        panes = [Pane.decode(r.value) for r in sink.records.values() if r.stream == "panes"]
        assert all(p.timing is Timing.ON_TIME and p.index == 0 for p in panes)
        got = {(p.key, p.window): p.value for p in panes}
        assert len(panes) == len(got), "one pane per key and window"
        assert got == expected
        assert [r for r in sink.records.values() if r.stream == "late"] == []
    finally:
        stop.set()
        driver.stop()
        node.terminate()
        sink.stop()
        server.stop(0.5).wait()
