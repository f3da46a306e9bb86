"""How long a client command takes to start: ``millrace inject`` of one line, end to end.

A real injector runs as a child process; each run is a fresh ``millrace inject``
process sending one JSON line to it (exit 0: the record is in the durable log).
Beside it, in the same run, the floor every Python command pays: ``python -c pass``
and ``python -c "import grpc"`` (the client's one unavoidable library).

    python bench/client_start_bench.py [--runs 15] [--root OTHER_CHECKOUT]

``--root`` runs the client from another checkout (an A/B of two commits; the
injector is always this one's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._injector_cluster import write_deployment  # noqa: E402
from tests.support import CollectingSink, InjectorProcess, free_port  # noqa: E402

TOPOLOGY = """
[streams.events]
[streams.ok]

[computations.first]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
"""


def wall_s(command: list[str], stdin: bytes = b"", root: Path = ROOT) -> float:
    """Wall seconds of one run of ``command`` (which must succeed) with ``root``'s code."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    started = time.perf_counter()
    subprocess.run(command, input=stdin, check=True, capture_output=True, cwd=root, env=env)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout the client runs from")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port = free_port()
        sink = CollectingSink()
        deployment = write_deployment(
            work, TOPOLOGY, injector_port=port, nodes={"first": free_port()}, sink=sink.address
        )
        injector = InjectorProcess(deployment, work / "log", work / "injector.log")
        injector.start()
        try:
            inject = [python, "-m", "millrace", "inject", "--config", str(deployment)]
            inject += ["--stream", "events", "-"]
            line = b'{"key": "k", "value": "v", "ts": 1000}\n'
            wall_s(inject, line, args.root)  # warm the page cache
            figures: dict[str, list[float]] = {"inject": [], "python": [], "import_grpc": []}
            for _ in range(args.runs):  # interleaved: drift hits all three alike
                figures["inject"].append(wall_s(inject, line, args.root))
                figures["python"].append(wall_s([python, "-c", "pass"]))
                figures["import_grpc"].append(wall_s([python, "-c", "import grpc"]))
        finally:
            injector.terminate()
            sink.stop()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"{'command':<28}{'median s':>10}{'min s':>10}{'max s':>10}")
    for name, values in figures.items():
        print(f"{name:<28}{medians[name]:>10.3f}{min(values):>10.3f}{max(values):>10.3f}")
    print(
        f"RESULT bench=client_start command=inject_one_line runs={args.runs} "
        f"wall_s={medians['inject']:.3f} python_floor_s={medians['python']:.3f} "
        f"import_grpc_s={medians['import_grpc']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
