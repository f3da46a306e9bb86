"""Acks and sends wait for the fsync of their commit, while the worker goes on.

Real RocksDB on disk; the sync is gated by the test so the order of events is
decided, not timed: a commit is visible in the store, yet no ack leaves until
its sync returns. A failing sync stops the process (a real child process).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from pathlib import Path

from millrace.delivery._acks import DeliveryWork
from millrace.delivery._sender import Origin
from millrace.engine._frames import Frame
from millrace.node._after_sync import EXIT_SYNC_FAILED, AfterSync
from millrace.node._worker import IntervalWorker, WorkerHooks
from millrace.statestore import StoreClosedError
from millrace.wire.v1 import delivery_pb2
from tests.delivery_helpers import forwarding_processor
from tests.support import numbered_records


def test_actions_run_after_one_sync_in_the_order_submitted() -> None:
    events: list[str] = []
    gate = threading.Event()

    def sync() -> None:
        gate.wait(10)
        events.append("sync")

    after = AfterSync(sync, "t")
    after.start()
    for name in ("a", "b", "c"):
        after.submit(lambda name=name: events.append(name))  # type: ignore[misc]
    gate.set()
    after.stop()
    assert events[0] == "sync"
    assert [e for e in events if e != "sync"] == ["a", "b", "c"]


class _Hooks(WorkerHooks):
    def __init__(self) -> None:
        self.sent: list[Frame] = []

    def route(self, origin: Origin, frames: list[Frame]) -> None:
        self.sent.extend(frames)


def test_a_delivery_is_acked_and_its_productions_sent_only_after_the_sync(
    tmp_path: Path,
) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    store = processor.store
    gate, syncing = threading.Event(), threading.Event()
    real_sync = processor.make_durable

    def gated_sync() -> None:
        syncing.set()
        gate.wait(30)
        real_sync()

    processor.make_durable = gated_sync  # type: ignore[method-assign]
    hooks = _Hooks()
    worker = IntervalWorker(processor, hooks)
    acks: queue.SimpleQueue[delivery_pb2.DeliveryAck] = queue.SimpleQueue()
    records = numbered_records(0, 20, keys=4)
    batch = delivery_pb2.DeliveryBatch(batch_seq=7, records=records)
    batch.target.computation, batch.target.index = "fwd", 0
    worker.start()
    try:
        worker.deliver(DeliveryWork(batch, acks.put))
        assert syncing.wait(30), "the commit never reached its sync"
        # Committed (the ids are in the store), but not synced: nothing may leave yet.
        txn = store.begin(1)
        assert all(txn.seen([r.record_id for r in records]))
        txn.abort()
        assert acks.empty() and hooks.sent == []
        gate.set()
        ack = acks.get(timeout=30)
        assert ack.batch_seq == 7 and list(ack.committed_ids) == [r.record_id for r in records]
        assert sum(len(f.productions) for f in hooks.sent) == 20
    finally:
        gate.set()
        worker.stop()
        store.close()


def test_a_failed_sync_stops_the_process_before_any_action(tmp_path: Path) -> None:
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from millrace.node._after_sync import AfterSync

def sync():
    raise OSError("disk gone")

after = AfterSync(sync, "t")
after.start()
after.submit(lambda: print("ACTED", flush=True))
after.stop()
print("SURVIVED", flush=True)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == EXIT_SYNC_FAILED, done.stderr
    assert "ACTED" not in done.stdout and "SURVIVED" not in done.stdout
    assert "syncing the write-ahead log failed" in done.stderr


def test_a_store_closed_by_a_shutdown_drops_the_actions_without_exiting() -> None:
    def sync() -> None:
        raise StoreClosedError("closed")

    acted: list[str] = []
    after = AfterSync(sync, "t")
    after.start()
    after.submit(lambda: acted.append("a"))
    after.stop()
    assert acted == [], "nothing may be acked or sent without its sync"
