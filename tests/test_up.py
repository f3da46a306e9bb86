"""``millrace up`` with real processes.

The test runs a whole deployment (injector with a file source, one node, a sink in
this process), SIGKILLs the node and then the injector, checks both come back and
that every line written reaches the sink exactly once, then stops ``up`` with SIGTERM
and checks nothing is left. The supervisor itself: ``test_supervisor.py``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import ROOT, CollectingSink, alive, free_port, wait_until

pytestmark = pytest.mark.slow  # every test here spawns real processes


# -- millrace up ----------------------------------------------------------------------


def up_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "millrace", "up", *args]


def child_env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


TOPOLOGY = """
[streams.events]
[streams.ok]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
"""


def write_deployment(tmp_path: Path, sink_address: str, *, hosted: bool = True) -> Path:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "incoming").mkdir(exist_ok=True)
    node = f"""
[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{free_port()}"
metrics_port = {free_port()}
"""
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{free_port()}"
idle_timeout_ms = 1000
file_sources = {{ events = "incoming" }}
metrics_port = {free_port()}
{node if hosted else ""}
[sinks.ok]
address = "{sink_address}"
external = true
"""
    )
    return deployment


def test_up_rejects_a_bad_deployment(tmp_path: Path) -> None:
    missing = subprocess.run(
        up_command("--deployment", str(tmp_path / "nope.toml"), "--data-dir", str(tmp_path)),
        capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "nope.toml" in missing.stderr and "No such file" in missing.stderr
    unhosted = write_deployment(tmp_path, "127.0.0.1:1", hosted=False)
    invalid = subprocess.run(
        up_command("--deployment", str(unhosted), "--data-dir", str(tmp_path / "data")),
        capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert invalid.returncode == 2
    assert "interval 0 of 'count' is hosted by no node" in invalid.stderr
    assert not (tmp_path / "data").exists(), "nothing was started"


class UpProcess:
    """``millrace up`` as a child; its stdout and stderr lines collected by a thread."""

    def __init__(self, deployment: Path, data_dir: Path) -> None:
        self.process = subprocess.Popen(
            up_command("--deployment", str(deployment), "--data-dir", str(data_dir)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=child_env(), cwd=ROOT,
        )  # fmt: skip
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first output line matching ``pattern`` (waits for it)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                for line in self.lines:
                    match = re.search(pattern, line)
                    if match:
                        return match
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"no line matching {pattern!r} in:\n{self.output()}")
            time.sleep(0.05)


class Incoming:
    """Writes JSON-lines files into the injector's file-source directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written: list[str] = []

    def write(self, count: int) -> None:
        number = len(self.written)
        values = [f"v{number + i}" for i in range(count)]
        lines = [
            json.dumps({"key": f"k{i % 13}", "value": value, "ts": 1_000 + i})
            for i, value in enumerate(values)
        ]
        part = self.directory / f"part-{number:06d}.jsonl"
        staging = part.with_suffix(".tmp")
        staging.write_text("\n".join(lines) + "\n")
        staging.rename(part)  # the source sees whole files only
        self.written.extend(values)


def assert_exactly_once(sink: CollectingSink, incoming: Incoming, timeout: float = 60) -> None:
    def arrived() -> bool:
        return len(sink.records) >= len(incoming.written)

    wait_until(arrived, timeout, f"{len(incoming.written)} records at the sink")
    values = [v.decode() for v in sink.values()]
    assert sorted(values) == sorted(incoming.written), "each line reached the sink exactly once"


def test_up_runs_restarts_and_stops_a_deployment(tmp_path: Path) -> None:
    sink = CollectingSink()
    deployment = write_deployment(tmp_path, sink.address)
    data_dir = tmp_path / "data"
    up = UpProcess(deployment, data_dir)
    seen_pids: set[int] = set()
    try:
        up.wait_for(r"^millrace up: running \(Ctrl-C to stop\)$", 120)
        rows = {
            parts[0]: parts
            for parts in (line.split() for line in up.output().splitlines())
            if len(parts) == 4 and parts[2].isdigit()
        }
        assert set(rows) == {"injector", "count"}, up.output()
        pids = {name: int(row[2]) for name, row in rows.items()}
        seen_pids.update(pids.values())
        assert pids["injector"] != pids["count"]
        for name, row in rows.items():
            assert row[3].startswith("http://127.0.0.1:") and row[3].endswith("/metrics")
            with urllib.request.urlopen(row[3], timeout=10) as response:
                assert response.status == 200, name
        assert f"data dir: {data_dir}" in up.output()
        assert f"log dir:  {data_dir / 'logs'}" in up.output()
        assert (data_dir / "log" / "events").is_dir(), "the injector's durable log"
        assert (data_dir / "nodes" / "count" / "0").is_dir(), "the node's interval store"

        incoming = Incoming(tmp_path / "incoming")
        incoming.write(200)
        assert_exactly_once(sink, incoming)

        for victim in ("count", "injector"):
            old = pids[victim]
            os.kill(old, signal.SIGKILL)
            restarted = up.wait_for(
                rf"restarted {victim} \(pid (\d+)\) after exit code -9 \(SIGKILL\); restart #1", 30
            )
            pids[victim] = int(restarted.group(1))
            seen_pids.add(pids[victim])
            assert pids[victim] != old
            log = (data_dir / "logs" / f"{victim}.log").read_text()
            assert f"{victim} exited (exit code -9 (SIGKILL))" in log
            incoming.write(300)
            assert_exactly_once(sink, incoming)

        up.process.send_signal(signal.SIGTERM)
        assert up.process.wait(30) == 0, up.output()
        up.wait_for(r"^millrace up: stopped$", 5)
        assert not [pid for pid in seen_pids if alive(pid)], "no child outlived millrace up"
        leftovers = subprocess.run(
            ["pgrep", "-f", str(deployment)], capture_output=True, text=True, check=False
        )
        assert leftovers.stdout.strip() == "", "no process still runs this deployment"
        for name in ("count", "injector"):
            assert (
                f"{name} stopped (exit code 0)" in (data_dir / "logs" / f"{name}.log").read_text()
            )
        assert_exactly_once(sink, incoming)
    finally:
        if up.process.poll() is None:
            up.process.send_signal(signal.SIGTERM)
            try:
                up.process.wait(30)
            except subprocess.TimeoutExpired:
                up.process.kill()
                up.process.wait()
        for pid in seen_pids:  # only the children this test's `up` started
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        sink.stop()


def test_services_stop_when_up_is_sigkilled(tmp_path: Path) -> None:
    """``millrace up`` killed with SIGKILL cannot stop its services; they notice that
    their supervisor is gone and drain and stop on their own instead of running on
    unsupervised (holding their ports and stores)."""
    sink = CollectingSink()
    deployment = write_deployment(tmp_path, sink.address)
    data_dir = tmp_path / "data"
    up = UpProcess(deployment, data_dir)
    pids: list[int] = []
    try:
        up.wait_for(r"^millrace up: running \(Ctrl-C to stop\)$", 120)
        pids = [
            int(parts[2])
            for parts in (line.split() for line in up.output().splitlines())
            if len(parts) == 4 and parts[2].isdigit()
        ]
        assert len(pids) == 2, up.output()
        up.process.kill()
        up.process.wait()
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in pids if alive(pid)], "a service outlived its supervisor"
        for name in ("count", "injector"):
            log = (data_dir / "logs" / f"{name}.log").read_text()
            assert "the supervisor" in log and "is gone: draining" in log, log[-2000:]
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        sink.stop()
