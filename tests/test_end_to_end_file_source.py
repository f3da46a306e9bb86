"""File source -> injector -> two-stage topology -> sink, under SIGKILL of everything.

JSON-lines files (with a few malformed lines) are tailed by the injector
into the durable log and forwarded to ``counts`` (2 node processes) and on
to ``totals`` (1 node process). Injector and nodes are SIGKILLed and
restarted at random moments. No event ever arrives after the last file:
the source goes idle, its watermark advances with processing time, and every
window must close on its own. The sink must then hold exactly the oracle's
totals over the valid lines; malformed lines are in the rejects file, once each.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from tests.support import (
    CollectingSink,
    InjectorProcess,
    NodeProcess,
    chaos_kills,
    free_port,
    wait_quiescent,
)
from tests.workloads import expected_totals, totals_from_outputs, two_stage_topology_toml

pytestmark = pytest.mark.slow

WINDOW_MS = 2_000
FILES = 8
LINES_PER_FILE = 5_000
BOUND_MS = 500
MIN_KILLS = chaos_kills(10)


def write_files(directory: Path, rng: random.Random) -> list[tuple[bytes, int]]:
    directory.mkdir()
    events: list[tuple[bytes, int]] = []
    i = 0
    for number in range(FILES):
        lines = []
        for _ in range(LINES_PER_FILE):
            key = f"user{rng.randrange(50)}"
            ts = max(0, i * 2 - rng.randrange(BOUND_MS))
            lines.append(json.dumps({"key": key, "value": {"n": i}, "ts": ts}))
            events.append((key.encode(), ts))
            i += 1
        lines.insert(100, "{not json")
        lines.insert(200, json.dumps({"key": "x", "ts": 5}))  # no value
        (directory / f"part-{number:03d}.jsonl").write_text("\n".join(lines) + "\n")
    return events


def test_file_source_to_sink_is_exact_under_sigkill(tmp_path: Path) -> None:
    rng = random.Random(11)
    sink = CollectingSink()
    ports = {name: free_port() for name in ("injector", "counts-0", "counts-1", "totals")}
    incoming = tmp_path / "incoming"
    (tmp_path / "topology.toml").write_text(two_stage_topology_toml(WINDOW_MS))
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = {BOUND_MS}
idle_timeout_ms = 1000
file_sources = {{ events = "incoming" }}
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
address = "{sink.address}"
"""
    )
    events = write_files(incoming, rng)
    expected = expected_totals(events, WINDOW_MS)
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    nodes = {
        n: NodeProcess(deployment, n, tmp_path / "data", tmp_path)
        for n in ("counts-0", "counts-1", "totals")
    }
    processes: dict[str, InjectorProcess | NodeProcess] = {"injector": injector, **nodes}
    injector.start()  # nodes lease their intervals (and epochs) from it
    for node in nodes.values():
        node.start()
    stop = threading.Event()
    kills = [0]

    def chaos() -> None:
        while not stop.is_set() and kills[0] < MIN_KILLS:
            time.sleep(rng.uniform(0.2, 0.8))
            victim = processes[rng.choice(sorted(processes))]
            victim.kill()
            kills[0] += 1
            victim.start()

    chaos_thread = threading.Thread(target=chaos, daemon=True)
    chaos_thread.start()
    try:
        deadline = time.monotonic() + 240
        while len(sink.records) < len(expected) and time.monotonic() < deadline:
            time.sleep(0.1)
        chaos_thread.join(60)
        # Nothing left in flight and every timer fired: no later output can appear.
        node_ports = [ports[name] for name in ("counts-0", "counts-1", "totals")]
        wait_quiescent([f"127.0.0.1:{port}" for port in node_ports], 120)
        assert kills[0] >= MIN_KILLS
        assert totals_from_outputs(sink.values()) == expected
        rejects = [
            json.loads(line)
            for line in (tmp_path / "log" / "events" / "rejects.jsonl").read_text().splitlines()
        ]
        assert {(r["file"], r["line"]) for r in rejects} == {
            (f"part-{n:03d}.jsonl", line) for n in range(FILES) for line in (101, 201)
        }
        assert len(rejects) == 2 * FILES, "no reject written twice across the injector's kills"
    finally:
        stop.set()
        for process in processes.values():
            process.terminate()
        sink.stop()
