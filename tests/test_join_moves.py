"""Issue 34: a join topology through repeated live moves, with SIGKILLs at each step.

Nexmark q4 of ``examples/nexmark`` (bids joined with their auction within its
lifetime, the highest bid per auction in a window that ends at a field, the mean
winning price per category) runs on real processes. The join and the per-auction
window have two intervals, each computation on two nodes: ``-a`` placed on both
intervals, ``-b`` on none. While ``millrace inject --finish`` pushes the auctions and
the bids, intervals of the two move back and forth (``millrace intervals move``), and
at a random moment of each move the old owner, the new owner or the injector is
SIGKILLed and started again. The sink must then hold exactly the plain-Python answer,
and every lease shown must have had one node per epoch, epochs only rising.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from examples.nexmark.__main__ import result
from examples.nexmark.events import generate
from examples.nexmark.oracle import answers
from tests.support import (
    ROOT,
    CollectingSink,
    InjectorProcess,
    NodeProcess,
    chaos_rng,
    free_port,
    wait_until,
)
from tests.support.move_cluster import LeaseWatch, lease_holders
from tests.support.nexmark_topology import renamed, write_files, write_inputs

pytestmark = pytest.mark.slow

MOVED = ("q4_offers", "q4_winner")
"""The computations whose intervals move: the join and the window read from the record."""
MOVES = 8


def nodes_of(computations: Iterable[str]) -> dict[str, tuple[str, list[int]]]:
    """Node name -> (its computation, its placed intervals)."""
    nodes: dict[str, tuple[str, list[int]]] = {}
    for name in computations:
        if name in MOVED:
            nodes[f"{name}-a"] = (name, [0, 1])
            nodes[f"{name}-b"] = (name, [])
        else:
            nodes[name] = (name, [0])
    return nodes


def test_q4_is_exact_through_moves_of_its_join_with_kills(tmp_path: Path) -> None:
    rng = chaos_rng(3402)
    events = generate(1_500, seed=4)
    expected = answers(events)["q4"]
    sink = CollectingSink()
    computations = renamed("q4")
    names = list(nodes_of(computations))
    ports = {name: free_port() for name in ["injector", *names]}
    for name in MOVED:
        computations[name]["intervals"] = 2
    deployment = write_files(tmp_path, computations, nodes_of(computations), sink.address, ports)
    write_inputs(tmp_path, events)
    injector_address = f"127.0.0.1:{ports['injector']}"
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    nodes = {n: NodeProcess(deployment, n, tmp_path / n, tmp_path) for n in names}
    processes: dict[str, InjectorProcess | NodeProcess] = {"injector": injector, **nodes}
    for process in processes.values():
        process.start()
    watch = LeaseWatch(injector_address)
    watch.start()
    moved: list[str] = []
    failures: list[BaseException] = []

    def move_repeatedly() -> None:
        try:
            for step in range(MOVES):
                computation = MOVED[step % 2]
                interval = rng.randrange(2)

                def leased(c: str = computation) -> bool:
                    return len(lease_holders(injector_address, c)) == 2

                wait_until(leased, 120, f"both intervals of {computation} leased")
                source = lease_holders(injector_address, computation)[interval]
                target = f"{computation}-b" if source.endswith("-a") else f"{computation}-a"
                command = [
                    sys.executable, "-m", "millrace", "intervals", "move", "--config",
                    str(deployment), "--computation", computation, "--interval",
                    str(interval), "--to", target, "--no-wait",
                ]  # fmt: skip
                done = subprocess.run(
                    command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
                )
                assert done.returncode == 0, done.stdout + done.stderr
                victim = rng.choice([source, target, "injector"])
                time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.15), rng.uniform(0.15, 1.0)]))
                processes[victim].kill()
                time.sleep(rng.uniform(0.0, 0.5))
                processes[victim].start()

                def arrived_at(c: str = computation, i: int = interval, t: str = target) -> bool:
                    return lease_holders(injector_address, c).get(i) == t

                wait_until(arrived_at, 120, f"{computation}/{interval} on {target}")
                moved.append(f"{computation}/{interval} -> {target} (killed {victim})")
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    mover = threading.Thread(target=move_repeatedly, daemon=True)
    mover.start()
    try:
        for stream in ("auctions", "bids"):
            for _ in range(10):  # started while the injector was down: run it again, as a
                # user would (the batches' idempotency keys make a second run harmless)
                done = subprocess.run(
                    [sys.executable, "-m", "millrace", "inject", "--config", str(deployment),
                     "--stream", stream, "--batch", "20", "--finish",
                     str(tmp_path / f"{stream}.jsonl")],
                    check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
                )  # fmt: skip
                if "cannot reach the injector" not in done.stderr:
                    break
                time.sleep(0.5)
            assert done.returncode == 0, done.stdout + done.stderr
        mover.join(600)
        assert not failures, failures
        assert len(moved) == MOVES, moved

        def arrived() -> int:
            return sum(1 for r in list(sink.records.values()) if r.stream == "q4_out")

        wait_until(lambda: arrived() >= len(expected), 240, "every q4 result at the sink")
        time.sleep(1.0)  # anything written twice would show up now
        outputs = [json.loads(r.value) for r in list(sink.records.values())
                   if r.stream == "q4_out"]  # fmt: skip
        assert result("q4", outputs) == expected
        watch.check()
    finally:
        for process in processes.values():
            process.terminate()
        sink.stop()
