"""The core's overhead per record around a user's Python ``process_record`` (issue 29).

A user computation that forwards each record (``Identity``: one ``ctx.produce`` per
record) runs in an interval's exactly-once step as a node runs it, without gRPC:
its deliveries' ``DeliveryBatch`` bytes read natively, dedup, the user function per
record, production ids and outbox frames, one fsynced RocksDB commit per 1,000
records, the previous batch's productions acknowledged, the garbage collector set as a
node sets it. Measured in the same run, the
user function alone: ``Identity.process_record`` called on the same records with a
context whose ``produce`` only appends. The overhead is the difference.

    python bench/user_overhead_bench.py [--records N] [--runs R]
    PYTHONPATH=/tmp/base python bench/user_overhead_bench.py   # another checkout's code

Prints a table and one ``RESULT bench=user_overhead ...`` line (medians of the runs).
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
sys.path.append(str(ROOT))  # after PYTHONPATH: an A/B runs another checkout's code

from millrace.computations import Computation, Context, Record, Topology  # noqa: E402
from millrace.deployment._runtime_tuning import settle_garbage_collector  # noqa: E402
from millrace.engine import IntervalProcessor  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from millrace.wire.v1 import delivery_pb2, record_pb2  # noqa: E402

BATCH = 1_000
KEYS = 10_000
TOPOLOGY = {
    "streams": {"in": {}, "out": {}},
    "computations": {
        "identity": {
            "handler": f"{__name__}:Identity",
            "inputs": {"in": "key"},
            "outputs": ["out"],
        }
    },
}


class Identity(Computation):
    """Forwards each record unchanged."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.produce("out", record.key, record.value)


class _AppendOnly:
    """The least a context's ``produce`` can do: keep what was produced."""

    def __init__(self) -> None:
        self.made: list[tuple[str, bytes, Any]] = []

    def produce(self, stream: str, key: bytes, value: Any, event_time_ms: int | None = None,
                *, serde: Any = None) -> None:  # fmt: skip
        self.made.append((stream, key, value))


def _records(count: int, start: int) -> list[record_pb2.Record]:
    return [_record(start + i) for i in range(count)]


def _record(n: int) -> record_pb2.Record:
    return record_pb2.Record(
        record_id=n.to_bytes(16, "big"), key=b"u%d" % (n % KEYS),
        value=b'{"value": %d}' % (n % 100), event_time_ms=1_700_000_000_000 + n,
        producer="injector", stream="in",
    )  # fmt: skip


def run_once(count: int, work: Path, start: int) -> tuple[float, float]:
    """CPU seconds of the exactly-once step and of the user function alone."""
    records = _records(count, start)
    batches: list[Any] = [records[at : at + BATCH] for at in range(0, count, BATCH)]
    native = hasattr(IntervalProcessor, "received")  # older code (an A/B) takes messages
    if native:
        batches = [[delivery_pb2.DeliveryBatch(records=b).SerializeToString()] for b in batches]
    path = work / f"store-{start}"
    store = StateStore.open_rocksdb(path, config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=Topology.from_dict(TOPOLOGY), computation="identity", interval=0,
        store=store, epoch=1,
    )  # fmt: skip
    acked: list[bytes] = []
    try:
        started = time.process_time()
        for batch in batches:
            processor.acknowledge(acked, flush=False)
            given = processor.received(batch) if native else batch
            outcome = processor.process_records(given)
            assert len(outcome.committed) == BATCH
            acked = outcome.outbox_keys
        step = time.process_time() - started
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    users = [
        Record(r.stream, r.key, r.value, r.event_time_ms, r.record_id, r.producer) for r in records
    ]
    identity, ctx = Identity(), _AppendOnly()
    started = time.process_time()
    for at in range(0, count, BATCH):
        ctx.made = []
        for record in users[at : at + BATCH]:
            identity.process_record(ctx, record)  # type: ignore[arg-type]
    alone = time.process_time() - started
    return step, alone


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="millrace-user-overhead-"))
    settle_garbage_collector()  # as a node does once started
    try:
        runs = [run_once(args.records, work, i * args.records) for i in range(args.runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.records
    step_us = statistics.median(s for s, _ in runs) / n * 1e6
    alone_us = statistics.median(a for _, a in runs) / n * 1e6
    overhead_us = statistics.median(s - a for s, a in runs) / n * 1e6
    print(f"identity process_record, {n:,} records, batches of {BATCH:,}, fsynced commits")
    print(f"  {'us/record':>10} {'user alone':>11} {'overhead':>9}")
    print(f"  {step_us:>10.2f} {alone_us:>11.2f} {overhead_us:>9.2f}")
    print(
        f"RESULT bench=user_overhead records={n} cpu_us_per_record={step_us:.2f} "
        f"user_alone_us={alone_us:.2f} overhead_us={overhead_us:.2f} runs={args.runs}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
