"""``millrace bootstrap`` against a real cluster (slow): the first half of the log
backfilled into the node's stores, the second half streamed online, gives every
window exactly as an independent computation over all the data (no gap, nothing
counted twice); windows still open at the cut are finished online."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millrace.local_cluster import start, stop
from tests.spark_backfill.test_replay import (
    DEPLOYMENT,
    T0,
    TOPOLOGY,
    WINDOW_MS,
    expected_windows,
    lines,
    sink_windows,
)
from tests.support import ROOT, InjectorProcess, free_port, wait_until


def inject(run: Path, name: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "millrace", "inject", "--config", "deployment.toml",
         "--stream", "events", name],
        check=True, capture_output=True, cwd=run,
    )  # fmt: skip


@pytest.mark.slow
def test_bootstrapped_state_then_online_equals_all_data(tmp_path: Path) -> None:
    rng = random.Random(3)
    events = [
        (f"u{rng.randrange(20)}", rng.randint(1, 100), T0 + i * 20 - rng.randrange(1000))
        for i in range(3000)
    ]
    cut = 1400  # offset N: the first half goes to the stores, the rest online
    marker = [("end-marker", 0, T0 + 3000 * 20 + 60_000)]
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "node", "sink")}
    (tmp_path / "deployment.toml").write_text(DEPLOYMENT.format(**ports))
    (tmp_path / "first.jsonl").write_text(lines(events[:cut]))
    (tmp_path / "second.jsonl").write_text(lines(events[cut:] + marker))
    data = tmp_path / "data"
    with InjectorProcess(tmp_path / "deployment.toml", data / "log", tmp_path / "inj.log"):
        inject(tmp_path, "first.jsonl")  # no node runs: nothing is processed yet

    result = subprocess.run(
        [sys.executable, "-m", "millrace", "bootstrap", "--config", "deployment.toml",
         "--computation", "agg", "--log", str(data / "log"), "--nodes-dir", str(data / "nodes"),
         "--until-offset", str(cut)],
        check=False, capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert f"records={cut} " in result.stdout
    assert (data / "nodes" / "agg" / "0").is_dir() and (data / "nodes" / "agg" / "1").is_dir()

    expected = expected_windows(events + marker)
    marker_window = ("end-marker", marker[0][2] - marker[0][2] % WINDOW_MS)
    expected.pop(marker_window)
    sink_file = tmp_path / "out" / "panes.jsonl"
    processes: list[subprocess.Popen[str]] = []
    try:
        sink = ("sink", "--config", "deployment.toml", "--stream", "panes")
        processes.append(start(sink, "serving", "sink", log=tmp_path / "sink.log", cwd=tmp_path))
        up = ("up", "--deployment", "deployment.toml", "--data-dir", str(data))
        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up.log",
                               cwd=tmp_path))  # fmt: skip
        inject(tmp_path, "second.jsonl")
        wait_until(lambda: len(sink_windows(sink_file)) >= len(expected), 120,
                   "every window in the sink")  # fmt: skip
    finally:
        stop(processes)
    assert sink_windows(sink_file) == expected


@pytest.mark.slow
def test_a_node_whose_disk_is_lost_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    """The first half runs online; the node's stores are deleted; ``--until-forwarded``
    rebuilds them from the log up to what the node had acknowledged; the second half
    streams online: every window equals the all-data computation."""
    rng = random.Random(4)
    events = [
        (f"u{rng.randrange(20)}", rng.randint(1, 100), T0 + i * 20 - rng.randrange(1000))
        for i in range(3000)
    ]
    marker = [("end-marker", 0, T0 + 3000 * 20 + 60_000)]
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "node", "sink")}
    (tmp_path / "deployment.toml").write_text(DEPLOYMENT.format(**ports))
    (tmp_path / "first.jsonl").write_text(lines(events[:1500]))
    (tmp_path / "second.jsonl").write_text(lines(events[1500:] + marker))
    data = tmp_path / "data"
    expected = expected_windows(events + marker)
    expected.pop(("end-marker", marker[0][2] - marker[0][2] % WINDOW_MS))
    first_half = expected_windows(events[:1500])
    sink_file = tmp_path / "out" / "panes.jsonl"
    sink = ("sink", "--config", "deployment.toml", "--stream", "panes")
    up = ("up", "--deployment", "deployment.toml", "--data-dir", str(data))
    processes: list[subprocess.Popen[str]] = []
    try:
        processes.append(start(sink, "serving", "sink", log=tmp_path / "sink.log", cwd=tmp_path))
        cluster = start(up, "millrace up: running", "up", log=tmp_path / "up.log", cwd=tmp_path)
        processes.append(cluster)
        inject(tmp_path, "first.jsonl")
        # Some windows are out; then the cluster stops and the node's disk is lost.
        wait_until(lambda: len(sink_windows(sink_file)) >= len(first_half) // 2, 120,
                   "the first windows in the sink")  # fmt: skip
        time.sleep(2)
        cluster.terminate()
        cluster.wait(60)
        processes.remove(cluster)
        shutil.rmtree(data / "nodes" / "agg")

        result = subprocess.run(
            [sys.executable, "-m", "millrace", "bootstrap", "--config", "deployment.toml",
             "--computation", "agg", "--log", str(data / "log"),
             "--nodes-dir", str(data / "nodes"), "--until-forwarded"],
            check=False, capture_output=True, text=True, cwd=tmp_path, timeout=600,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]

        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up2.log",
                               cwd=tmp_path))  # fmt: skip
        inject(tmp_path, "second.jsonl")
        wait_until(lambda: len(sink_windows(sink_file)) >= len(expected), 120,
                   "every window in the sink")  # fmt: skip
    finally:
        stop(processes)
    assert sink_windows(sink_file) == expected
