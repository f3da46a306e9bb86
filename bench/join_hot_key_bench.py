"""Joins on one hot key: the cost of a record as the key's backlog grows.

One key; ``--backlogs`` records (one per second of event time) wait in the join's
state, the watermark held back so none expires; then ``--probes`` records are
processed one commit each, timed, through the node's engine (``IntervalProcessor``
over RocksDB, commits unsynced):

- ``IntervalJoin``: the backlog is left records; probes alternate left and right,
  each matching one or two partners;
- ``TableJoin`` in event-time mode: the backlog is records waiting for the
  watermark; probes alternate such records and changes of the table row.

The library once kept a side, a history or the waiting records as one JSON list
rewritten on every record (issue 32: 351 -> 8,989 us per record from 500 to 4,000
waiting); now each is a row of its own, read by time range.

In the same run, the reference: the same probes through a computation that only
buffers a record in one state row (no join), at the smallest backlog.

    python bench/join_hot_key_bench.py [--backlogs 500,5000,50000] [--probes 200]

``PYTHONPATH=OTHER_CHECKOUT`` runs another checkout's library (an A/B).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: --root runs another checkout's code

from millrace.computations import Computation, Context, Record, Topology  # noqa: E402
from millrace.dataflow import IntervalJoin, JoinType, TableJoin  # noqa: E402
from millrace.engine import IntervalProcessor  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from millrace.wire.v1 import record_pb2  # noqa: E402

SECOND = 1_000


class HotJoin(IntervalJoin):
    left, right, output = "clicks", "views", "joined"
    lower_ms, upper_ms = -500, 500
    how = JoinType.INNER


class HotTableJoin(TableJoin):
    stream, table, output = "clicks", "views", "joined"
    mode = "event_time"


class BufferOnly(Computation):
    """The reference: one state row written per record, nothing read."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state(f"b/{record.event_time_ms:016x}", record.value)


def topology(handler: type[Computation]) -> Topology:
    return Topology.from_dict(
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


def per_record_us(handler: type[Computation], backlog: int, probes: int, work: Path) -> float:
    """Median microseconds of one probe's commit, after ``backlog`` waiting records: the
    node's engine over RocksDB (unsynced commits), productions acknowledged at once."""
    store = StateStore.open_rocksdb(work / f"{handler.__name__}-{backlog}",
                                    config=StoreConfig(sync=False))  # fmt: skip
    processor = IntervalProcessor(
        topology=topology(handler), computation="join", interval=0, store=store, epoch=1
    )
    number = 0

    def commit(stream: str, value: bytes, t: int) -> None:
        nonlocal number
        number += 1
        record = record_pb2.Record(record_id=number.to_bytes(16, "big"), key=b"hot",
                                   value=value, event_time_ms=t, stream=stream)  # fmt: skip
        outcome = processor.process_records([record], durable=False)
        if outcome.productions:
            processor.acknowledge([p.outbox_key for p in outcome.productions])

    try:
        processor.advance_watermark(0)  # held back: nothing expires
        for i in range(backlog):
            commit("clicks", b"c", i * SECOND)
        times = []
        for i in range(probes):
            stream = "views" if i % 2 else "clicks"
            started = time.perf_counter()
            commit(stream, b"p", (i % backlog) * SECOND + 300)
            times.append(time.perf_counter() - started)
    finally:
        store.close()
    return statistics.median(times) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlogs", default="500,5000,50000")
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    backlogs = [int(b) for b in args.backlogs.split(",")]
    work = Path(tempfile.mkdtemp(prefix="join-hot-key-"))
    reference = per_record_us(BufferOnly, backlogs[0], args.probes, work)
    print(f"{'join':<16}{'waiting records':>16}{'us per record':>16}{'vs smallest':>14}")
    lines = []
    for name, handler in (("interval", HotJoin), ("table_versioned", HotTableJoin)):
        figures = {b: per_record_us(handler, b, args.probes, work) for b in backlogs}
        for backlog, us in figures.items():
            print(f"{name:<16}{backlog:>16,}{us:>16.0f}{us / figures[backlogs[0]]:>14.2f}")
        growth = figures[backlogs[-1]] / figures[backlogs[0]]
        lines.append(
            f"RESULT bench=join_hot_key join={name} probes={args.probes} "
            + " ".join(f"us_at_{b}={us:.0f}" for b, us in figures.items())
            + f" growth={growth:.2f} reference_us={reference:.0f}"
        )
    print(f"{'reference':<16}{'':>16}{reference:>16.0f}   (one state row per record, no join)")
    for line in lines:
        print(line)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
