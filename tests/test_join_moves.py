"""Issue 34: a join topology through repeated live moves, splits and merges, with SIGKILLs
at each step.

Nexmark q4 of ``examples/nexmark`` (bids joined with their auction within its
lifetime, the highest bid per auction in a window that ends at a field, the mean
winning price per category) runs on real processes. The join and the per-auction
window have two intervals, each computation on two nodes: ``-a`` placed on both
intervals, ``-b`` on none. While ``millrace inject --finish`` pushes the auctions and
the bids, intervals of the two move back and forth (``millrace intervals move``), and
at a random moment of each move the old owner, the new owner or the injector is
SIGKILLed and started again; in the second test intervals of both are split, a half
moved away and back, and the halves merged (``millrace intervals split``, ``merge``),
with a SIGKILL of a node or the injector at each step. The sink must then hold exactly
the plain-Python answer, and every lease shown must have had one node per epoch,
epochs only rising.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
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

    def steps(run: Callable[[list[str], list[str], Callable[[], bool]], None], at: str) -> None:
        for step in range(MOVES):
            computation = MOVED[step % 2]
            interval = rng.randrange(2)

            def leased(c: str = computation) -> bool:
                return len(lease_holders(at, c)) == 2

            wait_until(leased, 120, f"both intervals of {computation} leased")
            source = lease_holders(at, computation)[interval]
            target = f"{computation}-b" if source.endswith("-a") else f"{computation}-a"

            def arrived_at(c: str = computation, i: int = interval, t: str = target) -> bool:
                return lease_holders(at, c).get(i) == t

            move = ["move", "--computation", computation, "--interval", str(interval)]
            run([*move, "--to", target], [source, target, "injector"], arrived_at)

    run_q4(tmp_path, rng, steps, MOVES)


def test_q4_is_exact_through_splits_moves_and_merges_with_kills(tmp_path: Path) -> None:
    rng = chaos_rng(3404)

    def steps(run: Callable[[list[str], list[str], Callable[[], bool]], None], at: str) -> None:
        for computation in MOVED:
            home, away = f"{computation}-a", f"{computation}-b"

            def runs(wanted: dict[int, str], c: str = computation) -> Callable[[], bool]:
                return lambda: all(lease_holders(at, c).get(i) == n for i, n in wanted.items())

            wait_until(runs({0: home, 1: home}), 120, f"both intervals of {computation} leased")
            split = ["split", "--computation", computation, "--interval", "1"]
            run(split, [home, "injector"], runs({4: home, 5: home}))
            to = ["move", "--computation", computation, "--interval", "5", "--to"]
            run([*to, away], [home, away, "injector"], runs({5: away}))
            run([*to, home], [home, away, "injector"], runs({5: home}))
            merge = ["merge", "--computation", computation, "--interval", "4"]
            run(merge, [home, "injector"], runs({1: home}))

    run_q4(tmp_path, rng, steps, 2 * 4)


def run_q4(
    tmp_path: Path,
    rng: random.Random,
    steps: Callable[[Callable[[list[str], list[str], Callable[[], bool]], None], str], None],
    expected_steps: int,
) -> None:
    """Nexmark q4 on real processes while ``steps(run, injector_address)`` changes the
    layout: each ``run(command, victims, done)`` runs ``millrace intervals COMMAND``,
    SIGKILLs one of ``victims`` at a random moment and starts it again, and waits until
    ``done()``. Then the sink must hold exactly the plain-Python answer."""
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
    done_steps: list[str] = []
    failures: list[BaseException] = []

    def run(command: list[str], victims: list[str], done: Callable[[], bool]) -> None:
        args = [sys.executable, "-m", "millrace", "intervals", *command, "--config",
                str(deployment), "--no-wait"]  # fmt: skip
        answer = subprocess.run(
            args, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
        )
        assert answer.returncode == 0, answer.stdout + answer.stderr
        victim = rng.choice(victims)
        time.sleep(rng.choice([0.0, rng.uniform(0.0, 0.15), rng.uniform(0.15, 1.0)]))
        processes[victim].kill()
        time.sleep(rng.uniform(0.0, 0.5))
        processes[victim].start()
        wait_until(done, 120, f"{' '.join(command)} done")
        done_steps.append(f"{' '.join(command)} (killed {victim})")

    def change_layout() -> None:
        try:
            steps(run, injector_address)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    changer = threading.Thread(target=change_layout, daemon=True)
    changer.start()
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
        changer.join(600)
        assert not failures, failures
        assert len(done_steps) == expected_steps, done_steps

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
