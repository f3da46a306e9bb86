"""A bounded input completes by itself: ``millrace inject --finish``, under SIGKILL.

A finite JSON-lines file goes through a real injector into two computations on
their own node processes: a global-window count per key (whose on-time pane can
only fire at the end of time) and 1-minute tumbling counts. The injector's idle
timeout is an hour: nothing but the finished stream can close a window. While
``millrace inject --finish`` runs, the nodes and the injector are SIGKILLed and
restarted at random. The sink must then hold exactly one on-time pane per key and
per window, equal to a count over the file; every watermark is the end of time;
re-running the command is answered with replays, and a new record is refused.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from millrace.computations import MAX_TIME
from tests.support import (
    ROOT,
    CollectingSink,
    InjectorProcess,
    NodeProcess,
    RandomKills,
    chaos_kills,
    chaos_rng,
    free_port,
    wait_until,
)
from tests.support.watermarks import wait_for_watermarks

pytestmark = pytest.mark.slow

EVENTS = 4_000
KEYS = 25
MINUTE_MS = 60_000
MIN_KILLS = chaos_kills(6)
TOPOLOGY = """
[streams.events]
[streams.per_key]
[streams.per_minute]

[computations.keys]
handler = "millrace.dataflow:WindowedAggregation"
inputs = { events = "key" }
outputs = ["per_key"]
params = { window = "global", aggregate = "count", output = "per_key" }

[computations.minutes]
handler = "millrace.dataflow:WindowedAggregation"
inputs = { events = "key" }
outputs = ["per_minute"]
params = { window = "tumbling:1m", aggregate = "count", output = "per_minute" }
"""


def write_deployment(tmp_path: Path, ports: dict[str, int], sink: str) -> Path:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 2000
idle_timeout_ms = 3600000
[nodes.keys]
computation = "keys"
intervals = [0]
address = "127.0.0.1:{ports["keys"]}"
[nodes.minutes]
computation = "minutes"
intervals = [0]
address = "127.0.0.1:{ports["minutes"]}"
[sinks.per_key]
address = "{sink}"
[sinks.per_minute]
address = "{sink}"
"""
    )
    return deployment


def write_input(path: Path, rng: random.Random) -> list[tuple[str, int]]:
    events = [(f"user{rng.randrange(KEYS)}", i * 50 + rng.randrange(1_000)) for i in range(EVENTS)]
    path.write_text(
        "".join(json.dumps({"key": k, "value": 1, "ts": ts}) + "\n" for k, ts in events)
    )
    return events


def millrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", *args],
        check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def panes(sink: CollectingSink) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
    per_key: dict[str, int] = {}
    per_minute: dict[tuple[str, int], int] = {}
    for record in list(sink.records.values()):
        pane = json.loads(record.value)
        assert pane["timing"] == "on_time" and pane["pane"] == 0, pane
        if record.stream == "per_key":
            assert pane["key"] not in per_key, "one pane per key"
            per_key[pane["key"]] = pane["value"]
        else:
            window = (pane["key"], pane["window"][0])
            assert window not in per_minute, "one pane per window"
            per_minute[window] = pane["value"]
    return per_key, per_minute


def test_a_finished_input_completes_every_window_under_sigkill(tmp_path: Path) -> None:
    rng = chaos_rng(5)
    sink = CollectingSink()
    ports = {name: free_port() for name in ("injector", "keys", "minutes")}
    deployment = write_deployment(tmp_path, ports, sink.address)
    events = write_input(tmp_path / "events.jsonl", rng)
    expected_keys = dict(Counter(key for key, _ in events))
    expected_minutes = dict(Counter((key, ts // MINUTE_MS * MINUTE_MS) for key, ts in events))
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    nodes = {
        n: NodeProcess(deployment, n, tmp_path / "data", tmp_path) for n in ports if n != "injector"
    }
    processes: dict[str, InjectorProcess | NodeProcess] = {"injector": injector, **nodes}
    injector.start()
    for node in nodes.values():
        node.start()
    inject = [
        "inject", "--config", str(deployment), "--stream", "events", "--batch", "200",
        "--finish", str(tmp_path / "events.jsonl"),
    ]  # fmt: skip
    chaos = RandomKills(processes, rng, MIN_KILLS)
    try:
        with chaos:
            done = millrace(*inject)
            chaos.finish()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "stream events finished" in done.stdout, done.stdout
        wanted = len(expected_keys) + len(expected_minutes)
        wait_until(lambda: len(sink.records) >= wanted, 180, "every pane at the sink")
        marks = wait_for_watermarks(
            f"127.0.0.1:{ports['injector']}", ["keys", "minutes"], MAX_TIME, 60
        )
        assert marks.get("keys") == marks.get("minutes") == MAX_TIME, marks
        time.sleep(1.0)  # nothing more may come
        per_key, per_minute = panes(sink)
        assert per_key == {k: n for k, n in expected_keys.items()}
        assert per_minute == {(k, w): n for (k, w), n in expected_minutes.items()}
        assert chaos.kills >= MIN_KILLS

        again = millrace(*inject)
        assert again.returncode == 0, again.stdout + again.stderr
        assert f"({EVENTS} new" not in again.stdout and "0 new" in again.stdout, again.stdout
        assert "it was already" in again.stdout
        (tmp_path / "late.jsonl").write_text('{"key": "user1", "value": 1, "ts": 5}\n')
        late = millrace("inject", "--config", str(deployment), "--stream", "events",
                        str(tmp_path / "late.jsonl"))  # fmt: skip
        assert late.returncode == 2 and "is finished" in late.stdout + late.stderr, late
        assert len(sink.records) == wanted, "nothing after the end"
    finally:
        chaos.stop()
        for process in processes.values():
            process.terminate()
        sink.stop()
