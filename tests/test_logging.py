"""Structured logs: MILLRACE_LOG_FORMAT=json gives one JSON object per line, and the
services log their significant events (start, recovery with counts, drain, stop) that way."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from millrace.deployment._logging import configure_logging
from tests.support import ROOT, free_port, stop_gracefully


def test_json_lines(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MILLRACE_LOG_FORMAT", "json")
    configure_logging()
    logging.getLogger("millrace.test").warning(
        "interval %s fenced", "counts/0", extra={"event": "fenced", "epoch": 4}
    )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    body = json.loads(line)
    assert body["level"] == "WARNING" and body["message"] == "interval counts/0 fenced"
    assert body["event"] == "fenced" and body["epoch"] == 4 and body["ts"].endswith("Z")
    logging.getLogger().handlers.clear()


TOPOLOGY = """
[streams.events]
[streams.out]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["out"]
"""


def events_of(log_path: Path) -> list[dict[str, object]]:
    """Every line of a service's stderr, each of which must be one JSON object."""
    return [json.loads(line) for line in log_path.read_text().splitlines()]


@pytest.mark.slow
def test_services_log_start_recovery_and_stop_as_json(tmp_path: Path) -> None:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    injector_port, node_port = free_port(), free_port()
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{injector_port}"
[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{node_port}"
[sinks.out]
address = "127.0.0.1:{free_port()}"
"""
    )
    env = {**os.environ, "MILLRACE_LOG_FORMAT": "json", "MILLRACE_LOG_LEVEL": "INFO"}
    logs = {name: tmp_path / f"{name}.log" for name in ("injector", "node")}
    commands = {
        "injector": ["injector", "--log-dir", str(tmp_path / "log")],
        "node": ["node", "--name", "count", "--data-dir", str(tmp_path / "data")],
    }

    def start(name: str) -> subprocess.Popen[str]:
        with open(logs[name], "w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "millrace", *commands[name][:1],
                 "--config", str(deployment), *commands[name][1:]],
                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=ROOT,
            )  # fmt: skip
        assert process.stdout is not None
        if "serving" not in process.stdout.readline():
            process.kill()
            raise AssertionError(f"{name} did not start: {logs[name].read_text()[-2000:]}")
        return process

    injector = start("injector")
    try:
        stop_gracefully(start("node"), logs["node"])
    finally:
        stop_gracefully(injector, logs["injector"])
    node_events = events_of(logs["node"])
    injector_events = events_of(logs["injector"])

    def kinds(events: list[dict[str, object]]) -> list[object]:
        return [event.get("event") for event in events if "event" in event]

    assert kinds(injector_events) == ["recovered", "start", "stopping", "stop"]
    assert kinds(node_events) == ["recovered", "start", "stopping", "stop"]
    recovered = next(e for e in node_events if e.get("event") == "recovered")
    assert recovered["computation"] == "count" and recovered["interval"] == 0
    assert isinstance(recovered["epoch"], int) and recovered["epoch"] >= 1
    assert {"dedup_ids", "timers", "outbox"} <= set(recovered)
    assert all(event["level"] in {"INFO", "WARNING"} for event in injector_events + node_events)
