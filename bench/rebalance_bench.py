"""The rebalancer under skewed keys: throughput before and after it settles (issue 34).

A ``counts`` computation (per-key tumbling-window counts) with ``--intervals`` key
intervals (8; the issue's figure: 1, which the rebalancer must split), all placed on
node ``a``; node ``b`` has none. Keys follow a Zipf law (s = 1.3 over 10,000
keys, the hottest about a quarter of the load). An ingest client pushes 1,000-record
requests as fast as the pipeline takes them. Two runs, interleaved, ``--runs`` times:

- ``off``: the rebalancer off: ``a`` runs everything, ``b`` idles (the single-node
  rate);
- ``on``: ``[rebalance] enabled``: the injector moves intervals to ``b`` (one per
  second at most), splitting one too heavy to move, until the loads are within 30 %;
  the time from the first record to the last change is the time to settle; the rate
  before its first change is the single-node rate of the same run.

Throughput is the sum of the records/s the nodes report for their intervals
(``Control.GetLayout``), the median of one-second samples over the run's last 10 s
(a run whose last move came within those 10 s is marked as not settled).
Both runs share the machine with the injector, the client and the sink (2 cores here).

    .venv/bin/python bench/rebalance_bench.py --runs 3
    .venv/bin/python bench/rebalance_bench.py --runs 3 --intervals 1

Prints a table and ``RESULT bench=rebalance`` lines.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.clickstream.demo import free_port  # noqa: E402
from millrace.injector.client import IngestClient  # noqa: E402
from millrace.local_cluster import start_services, stop  # noqa: E402
from millrace.wire.v1 import control_pb2, control_pb2_grpc  # noqa: E402

KEYS = 10_000
ZIPF_S = 1.3
BATCH = 1_000
SHOW_MOVES = False
TOPOLOGY = """
[streams.events]
[streams.counts_out]

[computations.counts]
handler = "millrace.dataflow:WindowedAggregation"
intervals = {intervals}
inputs = {{ events = "key" }}
outputs = ["counts_out"]

[computations.counts.params]
window = "tumbling:1000"
aggregate = "count"
output = "counts_out"
"""


def zipf_keys(count: int, rng: random.Random) -> list[bytes]:
    """``count`` keys drawn from a Zipf law over :data:`KEYS` keys."""
    weights = [1 / (rank**ZIPF_S) for rank in range(1, KEYS + 1)]
    names = [b"user-%05d" % rank for rank in range(KEYS)]
    return rng.choices(names, weights=weights, k=count)


def write_deployment(work: Path, rebalance: bool, intervals: int) -> tuple[Path, dict[str, str]]:
    (work / "topology.toml").write_text(TOPOLOGY.format(intervals=intervals))
    at = {name: f"127.0.0.1:{free_port()}" for name in ("injector", "a", "b", "sink")}
    path = work / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "{at["injector"]}"
[nodes.a]
computation = "counts"
intervals = {list(range(intervals))}
address = "{at["a"]}"
[nodes.b]
computation = "counts"
address = "{at["b"]}"
[sinks.counts_out]
address = "{at["sink"]}"
path = "out.jsonl"
[rebalance]
enabled = {"true" if rebalance else "false"}
period_ms = 1000
imbalance_percent = 30
min_records_per_s = 100
max_moves_per_minute = 60
cooldown_ms = 10000
"""
    )
    return path, at


def one_run(rebalance: bool, seconds: float, keys: list[bytes], intervals: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="millrace-rebalance-") as tmp:
        work = Path(tmp)
        deployment, at = write_deployment(work, rebalance, intervals)
        processes = start_services(deployment, work, nodes=("a", "b"), sinks=("counts_out",))
        try:
            return measure(at["injector"], seconds, keys)
        finally:
            stop(processes)


def measure(injector: str, seconds: float, keys: list[bytes]) -> dict[str, float]:
    client = IngestClient(injector, timeout_s=30)
    stopping = threading.Event()

    def ingest() -> None:
        sent = 0
        while not stopping.is_set():
            start_at = sent % (len(keys) - BATCH)
            rows = [(k, b"1", 1_700_000_000_000 + sent + i)
                    for i, k in enumerate(keys[start_at : start_at + BATCH])]  # fmt: skip
            client.ingest("events", rows, idempotency_key=f"b{sent}", give_up_after_s=60)
            sent += BATCH

    feeder = threading.Thread(target=ingest, daemon=True)
    started = time.monotonic()
    feeder.start()
    samples: list[tuple[float, float]] = []
    last_move = 0.0
    first_move: float | None = None
    moves = 0
    changes: list[str] = []
    with grpc.insecure_channel(injector) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        while time.monotonic() - started < seconds:
            time.sleep(1.0)
            layout = stub.GetLayout(control_pb2.GetLayoutRequest(), timeout=10)
            now = time.monotonic() - started
            samples.append((now, sum(s.records_per_second for s in layout.intervals)))
            for change in layout.changes[moves:]:
                moved = f"{change.from_node_id} -> {change.to_node_id}"
                changes.append(f"  {now:5.1f} s: {change.interval.index} {moved} ({change.reason})")
            if len(layout.changes) > moves:
                moves, last_move = len(layout.changes), now
                first_move = now if first_move is None else first_move
    stopping.set()
    feeder.join(60)
    tail = [rate for at, rate in samples if at >= seconds - 10]
    # Before the first change: the first second's sample is a cold start, left out.
    early = [rate for at, rate in samples[1:] if first_move is None or at < first_move]
    if changes and SHOW_MOVES:
        print("\n".join(changes), flush=True)
        print("  rec/s per second:", " ".join(f"{rate / 1000:.0f}k" for _, rate in samples))
    return {
        "rate": statistics.median(tail),
        "before": statistics.median(early) if early else float("nan"),
        "settled_s": last_move,
        "moves": moves,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=40.0, help="length of one run")
    parser.add_argument("--show-moves", action="store_true", help="print each move and why")
    parser.add_argument("--intervals", type=int, default=8, help="intervals to start with")
    args = parser.parse_args()
    global SHOW_MOVES
    SHOW_MOVES = args.show_moves
    keys = zipf_keys(200_000, random.Random(13))
    rows: list[tuple[int, dict[str, float], dict[str, float]]] = []
    for run in range(1, args.runs + 1):
        off = one_run(False, args.seconds, keys, args.intervals)
        on = one_run(True, args.seconds, keys, args.intervals)
        rows.append((run, off, on))
        note = (
            f"{on['moves']:.0f} changes, the last at {on['settled_s']:.0f} s; "
            f"{on['before']:.0f} rec/s before the first"
        )
        if on["settled_s"] > args.seconds - 10:
            note += ": NOT SETTLED (a move in the measured 10 s)"
        print(f"run {run}: off {off['rate']:.0f} rec/s, on {on['rate']:.0f} rec/s ({note})",
              flush=True)  # fmt: skip
    header = ("run", "off rec/s", "on rec/s", "on/off", "changes", "settled s", "before")
    print(" ".join(f"{h:>10}" for h in header))
    for run, off, on in rows:
        cells = (run, off["rate"], on["rate"], on["rate"] / off["rate"], on["moves"],
                 on["settled_s"], on["before"])  # fmt: skip
        print(" ".join(f"{c:>10.2f}" if i == 3 else f"{c:>10.0f}" for i, c in enumerate(cells)))
    ratio = statistics.median(on["rate"] / off["rate"] for _, off, on in rows)
    before = statistics.median(n["rate"] / n["before"] for _, _, n in rows)
    print(
        f"RESULT bench=rebalance intervals={args.intervals} "
        f"off_rps={statistics.median(o['rate'] for _, o, _ in rows):.0f} "
        f"on_rps={statistics.median(n['rate'] for _, _, n in rows):.0f} ratio={ratio:.2f} "
        f"settled_s={statistics.median(n['settled_s'] for _, _, n in rows):.0f} "
        f"changes={statistics.median(n['moves'] for _, _, n in rows):.0f} "
        f"ratio_to_before={before:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
