"""``millrace bootstrap`` against a real cluster (slow), in one run of three parts:

1. the first part of the log is backfilled into the node's stores (``--until-offset``);
2. the second part streams online from there: every window the sink then holds
   equals an independent computation over all the data (no gap, nothing counted
   twice; windows open at the cut are finished online);
3. the node's disk is lost: ``--until-forwarded`` rebuilds its stores from the log
   up to what it had acknowledged, and the last part streams online: every window
   equals the all-data computation.
"""

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


def bootstrap(run: Path, *until: str) -> subprocess.CompletedProcess[str]:
    data = run / "data"
    return subprocess.run(
        [sys.executable, "-m", "millrace", "bootstrap", "--config", "deployment.toml",
         "--computation", "agg", "--log", str(data / "log"), "--nodes-dir", str(data / "nodes"),
         *until],
        check=False, capture_output=True, text=True, cwd=run, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow
def test_bootstrap_then_online_then_a_lost_disk_rebuilt_equals_all_data(tmp_path: Path) -> None:
    rng = random.Random(3)
    events = [
        (f"u{rng.randrange(20)}", rng.randint(1, 100), T0 + i * 20 - rng.randrange(1000))
        for i in range(3000)
    ]
    cut, lost = 1000, 2000  # offset N of the bootstrap; where the disk is lost
    marker = [("end-marker", 0, T0 + 3000 * 20 + 60_000)]
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "node", "sink")}
    (tmp_path / "deployment.toml").write_text(DEPLOYMENT.format(**ports))
    (tmp_path / "first.jsonl").write_text(lines(events[:cut]))
    (tmp_path / "second.jsonl").write_text(lines(events[cut:lost]))
    (tmp_path / "third.jsonl").write_text(lines(events[lost:] + marker))
    data = tmp_path / "data"
    expected = expected_windows(events + marker)
    expected.pop(("end-marker", marker[0][2] - marker[0][2] % WINDOW_MS))
    sink_file = tmp_path / "out" / "panes.jsonl"
    sink = ("sink", "--config", "deployment.toml", "--stream", "panes")
    up = ("up", "--deployment", "deployment.toml", "--data-dir", str(data))

    # 1. The first part is only in the log, then backfilled into the stores.
    with InjectorProcess(tmp_path / "deployment.toml", data / "log", tmp_path / "inj.log"):
        inject(tmp_path, "first.jsonl")  # no node runs: nothing is processed yet
    result = bootstrap(tmp_path, "--until-offset", str(cut))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert f"records={cut} " in result.stdout
    assert (data / "nodes" / "agg" / "0").is_dir() and (data / "nodes" / "agg" / "1").is_dir()

    processes: list[subprocess.Popen[str]] = []
    try:
        # 2. Online from offset N: the windows the second part closes are exact.
        processes.append(start(sink, "serving", "sink", log=tmp_path / "sink.log", cwd=tmp_path))
        cluster = start(up, "millrace up: running", "up", log=tmp_path / "up.log", cwd=tmp_path)
        processes.append(cluster)
        inject(tmp_path, "second.jsonl")
        closed = len(expected_windows(events[: lost - 600]))  # windows the watermark passed
        wait_until(lambda: len(sink_windows(sink_file)) >= closed, 120,
                   "the windows the second part closes")  # fmt: skip
        time.sleep(2)
        cluster.terminate()
        cluster.wait(60)
        processes.remove(cluster)
        held = sink_windows(sink_file)
        assert {k: expected[k] for k in held} == held, "bootstrapped + online windows are exact"

        # 3. The node's disk is lost, rebuilt from the log, and the rest streams online.
        shutil.rmtree(data / "nodes" / "agg")
        result = bootstrap(tmp_path, "--until-forwarded")
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up2.log",
                               cwd=tmp_path))  # fmt: skip
        inject(tmp_path, "third.jsonl")
        wait_until(lambda: len(sink_windows(sink_file)) >= len(expected), 120,
                   "every window in the sink")  # fmt: skip
    finally:
        stop(processes)
    assert sink_windows(sink_file) == expected
