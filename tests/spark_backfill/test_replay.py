"""``millrace replay`` against a real cluster (slow): records too late for the online
system leave the sink's windows wrong; the replay's corrections, published through
the sink's own Delivery endpoint, make the sink equal an independent computation
over all the data, and a second replay publishes nothing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from millrace.local_cluster import start, stop
from millrace.sinks import read_sink_file, read_sink_records
from tests.support import ROOT, free_port, wait_until

T0 = 1_700_000_040_000
WINDOW_MS = 10_000
TOPOLOGY = f"""
[streams.events]
[streams.panes]

[computations.agg]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 2
inputs = {{ events = "key" }}
outputs = ["panes"]
params = {{ window = "tumbling:{WINDOW_MS}", aggregate = "count+sum", output = "panes", \
accumulation = "accumulating" }}
"""
DEPLOYMENT = """
topology = "topology.toml"
[injector]
address = "127.0.0.1:{injector}"
out_of_orderness_ms = 2000
idle_timeout_ms = 600000
[nodes.agg]
computation = "agg"
intervals = [0, 1]
address = "127.0.0.1:{node}"
[sinks.panes]
address = "127.0.0.1:{sink}"
path = "out/panes.jsonl"
external = true  # started by the test: it outlives the cluster, for the replay
"""


def lines(events: list[tuple[str, int, int]]) -> str:
    return "".join(json.dumps({"key": k, "value": v, "ts": t}) + "\n" for k, v, t in events)


def expected_windows(events: list[tuple[str, int, int]]) -> dict[tuple[str, int], dict[str, int]]:
    totals: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: {"count": 0, "sum": 0})
    for key, value, ts in events:
        window = totals[(key, ts - ts % WINDOW_MS)]
        window["count"] += 1
        window["sum"] += value
    return dict(totals)


def sink_windows(path: Path) -> dict[tuple[str, int], Any]:
    """The latest pane per (key, window) the sink file holds."""
    held: dict[tuple[str, int], Any] = {}
    if path.exists():
        for line in read_sink_file(path):
            pane = line["value"]  # a JSON value, as JSON (sink lines of version 2)
            held[(pane["key"], pane["window"][0])] = pane["value"]
    return held


def replay(run: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", "replay", "--config", "deployment.toml",
         "--log", str(run / "data" / "log"), "--include-active", *extra],
        check=False, capture_output=True, text=True, cwd=run, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow
def test_replay_corrects_the_sink_and_is_idempotent(tmp_path: Path) -> None:
    rng = random.Random(7)
    on_time = [
        (f"u{rng.randrange(20)}", rng.randint(1, 100), T0 + i * 20 - rng.randrange(1000))
        for i in range(3000)
    ]
    # 1% of records, each far behind: they arrive after their windows closed online.
    late = [(f"u{rng.randrange(20)}", rng.randint(1, 100), T0 + rng.randrange(30_000))
            for _ in range(30)]  # fmt: skip
    marker = [("end-marker", 0, T0 + 3_000 * 20 + 60_000)]  # closes every window online
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "node", "sink")}
    (tmp_path / "deployment.toml").write_text(DEPLOYMENT.format(**ports))
    (tmp_path / "main.jsonl").write_text(lines(on_time + marker))
    (tmp_path / "late.jsonl").write_text(lines(late))
    sink_file = tmp_path / "out" / "panes.jsonl"
    online_expected = expected_windows(on_time + marker)
    processes: list[subprocess.Popen[str]] = []
    try:
        sink = ("sink", "--config", "deployment.toml", "--stream", "panes")
        processes.append(start(sink, "serving", "sink", log=tmp_path / "sink.log", cwd=tmp_path))
        up = ("up", "--deployment", "deployment.toml", "--data-dir", str(tmp_path / "data"))
        cluster = start(up, "millrace up: running", "up", log=tmp_path / "up.log", cwd=tmp_path)
        processes.append(cluster)
        for name in ("main.jsonl", "late.jsonl"):
            subprocess.run(
                [sys.executable, "-m", "millrace", "inject", "--config", "deployment.toml",
                 "--stream", "events", name],
                check=True, capture_output=True, cwd=tmp_path,
            )  # fmt: skip
            if name == "main.jsonl":
                # Every window but the end marker's own (nothing after it closes it).
                wait_until(lambda: len(sink_windows(sink_file)) >= len(online_expected) - 1, 120,
                           "every on-time window in the sink")  # fmt: skip
        time.sleep(3)  # the late records reach the nodes (and are dropped as late)
        cluster.terminate()
        cluster.wait(60)
        processes.remove(cluster)

        all_data = expected_windows(on_time + late + marker)
        before = sink_windows(sink_file)
        wrong = {k for k, v in all_data.items() if before.get(k) != v}
        assert wrong, "the late records should have left some windows wrong online"

        first = replay(tmp_path, "--report", "report.json", "--work", str(tmp_path / "work"))
        assert first.returncode == 0, first.stdout + first.stderr[-3000:]
        # Stream equals batch, id for id: every pane the nodes emitted for a window the
        # late records did not touch is in the backfill, under the same record id.
        backfilled = {
            row["record_id"]: (row["key"], row["value"], row["event_time_ms"])
            for row in pq.read_table(tmp_path / "work" / "panes").to_pylist()
        }
        untouched = [
            record for record in read_sink_records(sink_file)
            if (json.loads(record.value)["key"], json.loads(record.value)["window"][0])
            not in wrong
        ]  # fmt: skip
        assert len(untouched) > 50
        for record in untouched:
            assert backfilled[record.record_id] == (record.key, record.value, record.event_time_ms)
        report = json.loads((tmp_path / "report.json").read_text())["streams"]["panes"]
        assert report["published"] == report["changed"] + report["missing"] == len(wrong)
        assert "REPLAY late_records=30" in first.stdout
        assert sink_windows(sink_file) == all_data

        second = replay(tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr[-3000:]
        assert "published=0" in second.stdout and "changed=0" in second.stdout
        assert sink_windows(sink_file) == all_data
    finally:
        stop(processes)
