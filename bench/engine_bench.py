"""The node's exactly-once step on the standard workload, records and timers, in one process.

What a node's worker does per turn, without gRPC: ``process_records`` on
1,000 delivered events read from their ``DeliveryBatch`` bytes (fsynced
commit), acknowledge the productions, move the input watermark to the newest
event time minus 5 s, fire the due timers (fsynced commit). The computation is
issue 19's: ``millrace.dataflow:WindowedAggregation``, 1-minute tumbling count + sum per
key, vectorized. CPU seconds of this process,
split into the records' share and the timers' share, beside a plain-Python
floor measured in the same run (a dict of [count, sum] per key and minute,
values read from their text). The garbage collector is set as a node sets it.

    python bench/engine_bench.py [--events N] [--runs R] [--root CHECKOUT]

``--root`` runs another checkout's code (an A/B against an older commit:
``git worktree add /tmp/old <commit>``). Prints a table and one
``RESULT bench=engine ...`` line (medians).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1_000
LAG_MS = 5_000


def run_once(events: int, work: Path) -> tuple[float, float, int]:
    """CPU seconds spent on records and on timers, and the timers fired."""
    from bench.standard_workload import MINUTE_MS, delivered, topology, workload
    from millrace.computations import Topology
    from millrace.deployment._runtime_tuning import settle_garbage_collector
    from millrace.engine import IntervalProcessor
    from millrace.statestore import StateStore, StoreConfig

    data = workload(events)
    times = data[1]
    path = work / f"engine-{time.monotonic_ns()}"
    path.mkdir()
    (path / "t.toml").write_text(topology(f"tumbling:{MINUTE_MS}", vectorized=True))
    store = StateStore.open_rocksdb(path / "store", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=Topology.load(path / "t.toml"), computation="agg", interval=0, store=store, epoch=1
    )
    records = delivered(data)
    stamps = times.tolist()
    batches: list[Any] = [records[at : at + BATCH] for at in range(0, len(records), BATCH)]
    if hasattr(processor, "received"):  # a node reads its deliveries' bytes natively
        from millrace.wire.v1 import delivery_pb2

        batches = [[delivery_pb2.DeliveryBatch(records=b).SerializeToString()] for b in batches]
    settle_garbage_collector()  # as a node does once started
    on_records = on_timers = 0.0
    fired = newest = 0
    try:
        for at, batch in zip(range(0, len(records), BATCH), batches, strict=True):
            started = time.process_time()
            given = processor.received(batch) if hasattr(processor, "received") else batch
            outcome = processor.process_records(given)
            processor.acknowledge(outcome.outbox_keys)
            middle = time.process_time()
            newest = max(newest, *stamps[at : at + BATCH])
            processor.advance_watermark(newest - LAG_MS)
            while True:
                outcome = processor.fire_timers()
                processor.acknowledge(outcome.outbox_keys)
                fired += outcome.timers_fired
                if outcome.timers_fired < 1000:
                    break
            on_records += middle - started
            on_timers += time.process_time() - middle
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    return on_records, on_timers, fired


def python_floor(events: int) -> float:
    """CPU seconds of the plain-Python floor over the same events."""
    from bench.standard_workload import plain_python_floor, workload

    return plain_python_floor(workload(events))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose code runs")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    work = Path(tempfile.mkdtemp(prefix="millrace-engine-bench-"))
    runs, floors = [], []
    try:
        for _ in range(args.runs):
            floors.append(python_floor(args.events))
            runs.append(run_once(args.events, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.events
    records_us = statistics.median(r for r, _, _ in runs) / n * 1e6
    timers_us = statistics.median(t for _, t, _ in runs) / n * 1e6
    total_us = statistics.median(r + t for r, t, _ in runs) / n * 1e6
    fired = runs[0][2]
    floor = n / statistics.median(floors)
    print(f"engine step, {n:,} events, {fired:,} timers fired, code of {args.root}")
    print(f"  {'us/event':>9} {'records':>8} {'timers':>7} {'us/fire':>8} {'floor/s':>10}")
    print(f"  {total_us:>9.1f} {records_us:>8.1f} {timers_us:>7.1f} "
          f"{timers_us * n / fired:>8.1f} {floor:>10,.0f}")  # fmt: skip
    print(
        f"RESULT bench=engine events={n} cpu_us_per_event={total_us:.1f} "
        f"records_us={records_us:.1f} timers_us={timers_us:.1f} "
        f"us_per_timer={timers_us * n / fired:.1f} python_floor_events_per_cpu_s={floor:.0f} "
        f"runs={args.runs}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
