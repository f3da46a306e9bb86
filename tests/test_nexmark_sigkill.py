"""Two Nexmark queries of ``examples/nexmark`` on real processes, under SIGKILL.

q4 (bids joined with their auction within its lifetime: bounds read from the
auction; the highest bid per auction in a window read from the record; the mean
winning price per category in a global window) and q5 (bid counts per hopping
window, then the auctions with the most, ties included) run as seven node processes
behind a real injector. The three streams are pushed from JSON-lines files with
``millrace inject --finish`` while the nodes and the injector are SIGKILLed and
restarted at random. The finished inputs complete every window, the global ones
too; the sinks must then hold exactly the plain-Python answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.nexmark.__main__ import result
from examples.nexmark.events import generate
from examples.nexmark.oracle import answers
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
from tests.support.nexmark_topology import renamed, write_files, write_inputs
from tests.support.watermarks import wait_for_watermarks

pytestmark = pytest.mark.slow

RUN = ("q4", "q5")
MIN_KILLS = chaos_kills(8)


def test_nexmark_q4_and_q5_on_real_processes_are_exact_under_sigkill(tmp_path: Path) -> None:
    rng = chaos_rng(21)
    events = generate(1_500, seed=4)
    expected = answers(events)
    sink = CollectingSink()
    names = [n for q in RUN for n in renamed(q)]
    ports = {name: free_port() for name in ["injector", *names]}
    computations = {n: c for q in RUN for n, c in renamed(q).items()}
    placements = {name: (name, [0]) for name in computations}
    deployment = write_files(tmp_path, computations, placements, sink.address, ports)
    write_inputs(tmp_path, events)
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    nodes = {n: NodeProcess(deployment, n, tmp_path / "data", tmp_path) for n in names}
    processes: dict[str, InjectorProcess | NodeProcess] = {"injector": injector, **nodes}
    injector.start()
    for node in nodes.values():
        node.start()
    chaos = RandomKills(processes, rng, MIN_KILLS, pause=(0.3, 1.2))
    chaos.start()
    try:
        for stream in ("auctions", "bids"):  # what q4 and q5 read
            done = subprocess.run(
                [sys.executable, "-m", "millrace", "inject", "--config", str(deployment),
                 "--stream", stream, "--batch", "100", "--finish",
                 str(tmp_path / f"{stream}.jsonl")],
                check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
        chaos.finish()
        wanted = {q: len(expected[q]) for q in RUN}

        def arrived() -> dict[str, int]:
            streams = [r.stream for r in list(sink.records.values())]
            return {q: streams.count(f"{q}_out") for q in RUN}

        wait_until(lambda: arrived() == wanted, 240, f"every result at the sink: {wanted}")
        marks = wait_for_watermarks(f"127.0.0.1:{ports['injector']}", names, MAX_TIME, 60)
        assert all(marks.get(n) == MAX_TIME for n in names), marks
        assert chaos.kills >= MIN_KILLS
        for query in RUN:
            outputs = [json.loads(r.value) for r in list(sink.records.values())
                       if r.stream == f"{query}_out"]  # fmt: skip
            assert result(query, outputs) == expected[query], query
    finally:
        chaos.stop()
        for process in processes.values():
            process.terminate()
        sink.stop()
