"""A node's worker retries a failed timer a little later, keeping its key's order.

Real RocksDB on disk and the real worker thread (no gRPC: the test delivers
batches to the worker directly and reads the store).
"""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path

from millrace.computations import Topology
from millrace.delivery._acks import DeliveryWork
from millrace.engine import state_key
from millrace.engine._processor import IntervalProcessor
from millrace.node._worker import TIMER_RETRY_S, IntervalWorker, WorkerHooks
from millrace.statestore import StateStore
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.support import wait_until

TOPOLOGY = {
    "streams": {"in": {}, "ok": {}},
    "computations": {
        "timers": {
            "handler": "tests.workloads:FlakyTimers",
            "inputs": {"in": "key"},
            "outputs": ["ok"],
            "max_attempts": 3,
        }
    },
}


def test_failed_timers_are_retried_later_in_order_and_poison_is_dead_lettered(
    tmp_path: Path,
) -> None:
    store = StateStore.open_rocksdb(tmp_path / "s")
    processor = IntervalProcessor(
        topology=Topology.from_dict(TOPOLOGY), computation="timers", interval=0,
        store=store, epoch=1,
    )  # fmt: skip
    worker = IntervalWorker(processor, WorkerHooks())
    acks: queue.SimpleQueue[delivery_pb2.DeliveryAck] = queue.SimpleQueue()
    batch = delivery_pb2.DeliveryBatch(batch_seq=1)
    batch.target.computation, batch.target.index = "timers", 0
    for i, (key, value) in enumerate(
        [(b"k", b"timers:flaky@10,t2@20"), (b"p", b"timers:poison@10,p2@20")]
    ):
        batch.records.append(
            record_pb2.Record(record_id=bytes([i + 1]) * 16, key=key, value=value, stream="in")
        )

    def seen(key: bytes) -> list[str]:
        raw = store.get(state_key(key, "seen"))
        return [] if raw is None else list(json.loads(raw))

    worker.start()
    try:
        worker.deliver(DeliveryWork(batch, acks.put))
        assert len(acks.get(timeout=30).committed_ids) == 2
        started = time.monotonic()
        worker.set_watermark(100)
        wait_until(lambda: seen(b"k") == ["flaky", "t2"] and seen(b"p") == ["p2"], 30, "the timers")
        # Three attempts, each a retry pause after the last: never all at once.
        assert time.monotonic() - started >= 2 * TIMER_RETRY_S
        (letter,) = processor.dead_letters()
        assert letter.attempts == 3 and letter.record.stream == "timer:poison"
    finally:
        worker.stop()
        store.close()
