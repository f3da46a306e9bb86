"""CPU per record of one key interval's exactly-once step, without gRPC or threads.

``IntervalProcessor.process_records`` over a real RocksDB store with fsynced
commits: dedup (Bloom + RocksDB), the node benchmark's stage-1 user code
(a state read and write and one production per record), one atomic commit
per batch with state, ids and outbox, and the previous batch's outbox deletes.
It is the floor under what a node spends per record; the rest of a node's
CPU goes to gRPC, acks and thread handoffs (compare ``bench/node_bench.py``).

    python bench/processor_bench.py [--batches 1000,34] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.node_bench import TOPOLOGY, make_record  # noqa: E402
from millrace.computations import Topology  # noqa: E402
from millrace.engine._processor import IntervalProcessor  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from millrace.wire.v1 import record_pb2  # noqa: E402

RECORDS_PER_ROUND = 12_000


def cpu_us_per_record(batch: int, rounds: int, work: Path) -> float:
    """Best (lowest) CPU microseconds per record over ``rounds`` rounds."""
    (work / "topology.toml").write_text(TOPOLOGY)
    topology = Topology.load(work / "topology.toml")
    store = StateStore.open_rocksdb(work / f"store-{batch}", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=topology, computation="enrich", interval=0, store=store, epoch=1
    )
    per_round = max(batch, RECORDS_PER_ROUND // batch * batch)
    acked: list[bytes] = []
    best = float("inf")
    offset = 0
    try:
        for round_ in range(rounds + 1):  # the first round warms up
            batches = [
                [make_record(offset + b + i, 500, 5000) for i in range(batch)]
                for b in range(0, per_round, batch)
            ]
            offset += per_round
            started = time.process_time()
            acked = _run(processor, batches, acked)
            spent = time.process_time() - started
            if round_:
                best = min(best, spent / per_round * 1e6)
    finally:
        store.close()
    return best


def _run(
    processor: IntervalProcessor, batches: list[list[record_pb2.Record]], acked: list[bytes]
) -> list[bytes]:
    for records in batches:
        processor.acknowledge(acked, flush=False)  # the deletes ride with the commit
        outcome = processor.process_records(records)
        acked = outcome.outbox_keys
    return acked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1000,34", help="records per commit, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(size) for size in args.batches.split(",")]
    work = Path(tempfile.mkdtemp(prefix="millrace-processor-bench-"))
    try:
        results = {size: cpu_us_per_record(size, args.rounds, work) for size in sizes}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("IntervalProcessor.process_records, sync commits (CPU of this process, best round)")
    print(f"  {'batch':>6}  {'us/record':>10}")
    for size, us in results.items():
        print(f"  {size:>6}  {us:>10.2f}")
    for size, us in results.items():
        print(f"RESULT bench=processor batch={size} cpu_us_per_record={us:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
