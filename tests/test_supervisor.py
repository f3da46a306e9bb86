"""The :class:`Supervisor` with trivial ``python -c`` children, real processes: ready lines,
restarts after SIGKILL with backoff, start failures that name the child and its log, and
the stop order."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from millrace.supervisor import ChildStartError, Supervisor
from tests.support import alive, wait_until

pytestmark = pytest.mark.slow  # every test here spawns real processes


def python_child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


SLEEPER = """
import sys, time
print("ready", flush=True)
print("after ready", flush=True)
sys.stderr.write("to stderr\\n"); sys.stderr.flush()
time.sleep(120)
"""


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


def test_a_child_that_ran_and_exited_0_by_itself_is_not_restarted(tmp_path: Path) -> None:
    supervisor = Supervisor(min_backoff_s=0.1, poll_interval_s=0.02)
    done = 'import sys, time; print("ready", flush=True); time.sleep(0.3); sys.exit(0)'
    failed = 'import sys, time; print("ready", flush=True); time.sleep(0.3); sys.exit(1)'
    supervisor.add("done", python_child(done), tmp_path / "done.log")
    supervisor.add("failed", python_child(failed), tmp_path / "failed.log")
    supervisor.start()
    try:
        wait_until(lambda: supervisor.restarts["failed"] >= 2, 20, "the failed child restarted")
        assert supervisor.restarts["done"] == 0 and supervisor.pid("done") is None
        assert "finished (exit 0): not restarted" in (tmp_path / "done.log").read_text()
    finally:
        supervisor.stop()


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
