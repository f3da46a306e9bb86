"""An interval join on one hot key: the cost of a record as the key's backlog grows.

One key; ``--backlog`` left records (one per second of event time) wait in the
join's state, the watermark held back so none expires; then ``--probes`` records
(half left, half right, each matching one or two partners) are processed one
commit each, timed. The library once kept a side as one JSON list rewritten on
every record (issue 32: 351 -> 8,989 us per record from 500 to 4,000 waiting);
now each waiting record is a row of its own, read by time range.

In the same run, the reference: the same probes through a computation that only
buffers a record in one state row (no join), at the smallest backlog.

    python bench/join_hot_key_bench.py [--backlogs 500,5000,50000] [--probes 200]

``PYTHONPATH=OTHER_CHECKOUT`` runs another checkout's library (an A/B).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: --root runs another checkout's code

from computations import Computation, Context, Record, Topology  # noqa: E402
from computations.testing import TestHarness  # noqa: E402
from dataflow import IntervalJoin, JoinType  # noqa: E402

SECOND = 1_000


class HotJoin(IntervalJoin):
    left, right, output = "clicks", "views", "joined"
    lower_ms, upper_ms = -500, 500
    how = JoinType.INNER


class BufferOnly(Computation):
    """The reference: one state row written per record, nothing read."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state(f"b/{record.event_time_ms:016x}", record.value)


def harness(handler: type[Computation]) -> TestHarness:
    return TestHarness(
        Topology.from_dict(
            {
                "streams": {"clicks": {}, "views": {}, "joined": {}},
                "computations": {
                    "join": {
                        "handler": handler,
                        "inputs": {"clicks": "key", "views": "key"},
                        "outputs": ["joined"],
                    }
                },
            }
        )
    )


def per_record_us(handler: type[Computation], backlog: int, probes: int) -> float:
    """Median microseconds of one probe's commit, after ``backlog`` waiting records."""
    h = harness(handler)
    for at in range(0, backlog, 1_000):
        for i in range(at, min(at + 1_000, backlog)):
            h.feed("clicks", b"hot", b"c", i * SECOND)
        h.run()
    h.advance_watermark(0)  # held back: nothing expires
    h.run()
    times = []
    for i in range(probes):
        stream = "views" if i % 2 else "clicks"
        t = (i % backlog) * SECOND + 300
        h.feed(stream, b"hot", b"p", t)
        started = time.perf_counter()
        h.run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlogs", default="500,5000,50000")
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    backlogs = [int(b) for b in args.backlogs.split(",")]
    reference = per_record_us(BufferOnly, backlogs[0], args.probes)
    figures = {backlog: per_record_us(HotJoin, backlog, args.probes) for backlog in backlogs}
    print(f"{'waiting records':>16}{'us per record':>16}{'vs smallest':>14}")
    for backlog, us in figures.items():
        print(f"{backlog:>16,}{us:>16.0f}{us / figures[backlogs[0]]:>14.2f}")
    print(f"{'reference':>16}{reference:>16.0f}   (one state row per record, no join)")
    largest = backlogs[-1]
    print(
        f"RESULT bench=join_hot_key probes={args.probes} "
        + " ".join(f"us_at_{b}={us:.0f}" for b, us in figures.items())
        + f" growth={figures[largest] / figures[backlogs[0]]:.2f} reference_us={reference:.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
