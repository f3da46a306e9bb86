"""``millrace up`` and its :class:`Supervisor`, with real processes.

The supervisor tests use trivial ``python -c`` children: ready lines, restarts
after SIGKILL with backoff, start failures that name the child and its log,
and the stop order. The ``millrace up`` test runs a whole deployment (injector
with a file source, one node, a sink in this process), SIGKILLs the node and
then the injector, checks both come back and that every line written reaches
the sink exactly once, then stops ``up`` with SIGTERM and checks nothing is left.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from millrace.supervisor import ChildStartError, Supervisor
from tests.cluster import ROOT, CollectingSink, free_port

pytestmark = pytest.mark.slow  # every test here spawns real processes


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def python_child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


SLEEPER = """
import sys, time
print("ready", flush=True)
print("after ready", flush=True)
sys.stderr.write("to stderr\\n"); sys.stderr.flush()
time.sleep(120)
"""


# -- Supervisor -----------------------------------------------------------------------


def test_supervisor_restarts_a_killed_child(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="millrace.supervisor")
    log_path = tmp_path / "logs" / "sleeper.log"
    supervisor = Supervisor(min_backoff_s=0.1, poll_interval_s=0.02, stop_timeout_s=5)
    supervisor.add("sleeper", python_child(SLEEPER), log_path, ready_prefix="ready")
    supervisor.start()
    pids: list[int] = []
    try:
        first = supervisor.pid("sleeper")
        assert first is not None and supervisor.ready_line("sleeper") == "ready"
        pids.append(first)

        def logged(count: int) -> bool:
            lines = log_path.read_text().splitlines()
            return lines.count("to stderr") == lines.count("after ready") == count

        wait_until(lambda: logged(1), 5, "the first incarnation's output")
        os.kill(first, signal.SIGKILL)
        wait_until(
            lambda: supervisor.is_running("sleeper") and supervisor.pid("sleeper") != first,
            10,
            "the restarted sleeper",
        )
        second = supervisor.pid("sleeper")
        assert second is not None
        pids.append(second)
        assert supervisor.restarts == {"sleeper": 1}
        restarts = [r.getMessage() for r in caplog.records if "restarted" in r.getMessage()]
        assert restarts == [
            f"restarted sleeper (pid {second}) after exit code -9 (SIGKILL); "
            "restart #1, backoff 0.1 s"
        ]
        wait_until(lambda: logged(2), 5, "the second incarnation's output")
    finally:
        supervisor.stop()
    assert not any(alive(pid) for pid in pids)
    assert supervisor.pid("sleeper") is None
    lines = log_path.read_text().splitlines()
    assert lines.count("after ready") == 2, "stdout after the ready line goes to the log"
    assert "ready" not in lines, "the ready line itself does not"
    assert lines.count("to stderr") == 2
    markers = [line.split("supervisor: ", 1)[1] for line in lines if " supervisor: " in line]
    assert [m.split(" (")[0] for m in markers] == [
        "sleeper started",
        "sleeper exited",
        "sleeper started",
        "sleeper stopped",
    ]
    assert markers[1] == "sleeper exited (exit code -9 (SIGKILL))"


def test_supervisor_backs_off_exponentially_and_caps_crash_loops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="millrace.supervisor")
    supervisor = Supervisor(
        min_backoff_s=0.1, max_backoff_s=0.4, burst_limit=3, poll_interval_s=0.02
    )
    crasher = 'import sys; print("ready", flush=True); sys.exit(3)'
    supervisor.add("crasher", python_child(crasher), tmp_path / "crasher.log")
    supervisor.start()
    try:
        wait_until(lambda: supervisor.restarts["crasher"] >= 6, 20, "six restarts")
    finally:
        supervisor.stop()
    messages = [r.getMessage() for r in caplog.records if "restarted crasher" in r.getMessage()]
    assert len(messages) >= 6
    assert all("after exit code 3;" in m for m in messages)
    backoffs = [float(re.findall(r"backoff (\d+\.\d) s", m)[0]) for m in messages]
    assert backoffs[:6] == [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]
    # more than burst_limit exits within the window: still restarted, at the max backoff
    assert ["crash loop" in m for m in messages[:6]] == [False] * 3 + [True] * 3


def test_supervisor_start_failures_name_the_child_and_its_log(tmp_path: Path) -> None:
    good = Supervisor(stop_timeout_s=5)
    good.add("first", python_child(SLEEPER), tmp_path / "first.log", ready_prefix="ready")
    good.add(
        "broken",
        python_child('import sys; sys.stderr.write("boom: bad config\\n"); sys.exit(5)'),
        tmp_path / "broken.log",
        ready_prefix="ready",
    )
    with pytest.raises(ChildStartError) as caught:
        good.start()
    message = str(caught.value)
    assert "broken did not start" in message
    assert "exit code 5" in message
    assert str(tmp_path / "broken.log") in message
    assert "boom: bad config" in message, "the log's last lines are quoted"
    first = good.ready_line("first")
    assert first == "ready", "the first child had started"
    assert good.pid("first") is None, "and was stopped again"

    slow = Supervisor(ready_timeout_s=0.5)
    slow.add("mute", python_child("import time; time.sleep(60)"), tmp_path / "mute.log")
    with pytest.raises(ChildStartError, match=r"mute did not start: no ready line within 0\.5 s"):
        slow.start()

    wrong = Supervisor()
    wrong.add("chatty", python_child(SLEEPER), tmp_path / "chatty.log", ready_prefix="serving")
    with pytest.raises(ChildStartError, match=r"its first line was 'ready', expected 'serving'"):
        wrong.start()


STOP_RECORDER = """
import signal, sys, time
name, delay, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def bye(signum, frame):
    time.sleep(delay)
    with open(path, "a") as handle:
        handle.write(name + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye if delay >= 0 else signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_supervisor_stops_higher_tiers_first_and_kills_leftovers(tmp_path: Path) -> None:
    order = tmp_path / "order.txt"
    supervisor = Supervisor(stop_timeout_s=1.0)
    for name, delay, tier in (("injector", 0.0, 0), ("node", 0.3, 1), ("stubborn", -1.0, 2)):
        argv = [*python_child(STOP_RECORDER), name, str(delay), str(order)]
        supervisor.add(name, argv, tmp_path / f"{name}.log", ready_prefix="ready", tier=tier)
    supervisor.start()
    pids = [supervisor.pid(name) for name in supervisor.names]
    started = time.monotonic()
    supervisor.stop()
    assert time.monotonic() - started < 5
    assert order.read_text().splitlines() == ["node", "injector"], "the node exits first"
    assert not any(alive(pid) for pid in pids if pid is not None)
    assert "stubborn stopped (exit code -9 (SIGKILL))" in (tmp_path / "stubborn.log").read_text()
    assert "node stopped (exit code 0)" in (tmp_path / "node.log").read_text()


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
        time.sleep(0.5)  # a late duplicate would show up now
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
