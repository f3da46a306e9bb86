"""An interval's upkeep: dead letters go after ``dead_letter_retention_ms``, and the
store's outbox and timer columns are compacted every few minutes.

Real RocksDB on disk and the real worker thread (no gRPC: the test delivers a batch
to the worker directly); the processor's clock is moved by hand.
"""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from millrace.computations import Topology, TopologyError
from millrace.delivery._acks import DeliveryWork
from millrace.engine._processor import IntervalProcessor
from millrace.engine._upkeep import COMPACTION_CHECK_MS, COMPACTION_FILES, LETTER_SWEEP_MS
from millrace.node._worker import IntervalWorker, WorkerHooks
from millrace.statestore import StateStore
from millrace.statestore._engine import Column
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.support import ManualClock, fill_outbox_with_tombstone_files, wait_until

HOUR_MS = 3_600_000


def topology(**settings: object) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"in": {}, "ok": {}},
            "computations": {
                "poison": {
                    "handler": "tests.workloads:Poison",
                    "inputs": {"in": "key"},
                    "outputs": ["ok"],
                    "max_attempts": 1,
                    **settings,
                }
            },
        }
    )


def poison_batch(seq: int, *ids: int) -> delivery_pb2.DeliveryBatch:
    batch = delivery_pb2.DeliveryBatch(batch_seq=seq)
    batch.target.computation, batch.target.index = "poison", 0
    for i in ids:
        batch.records.append(
            record_pb2.Record(record_id=bytes([i]) * 16, key=b"k", value=b"poison", stream="in")
        )
    return batch


def test_dead_letters_go_once_past_their_retention(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    store = StateStore.open_rocksdb(tmp_path / "s")
    processor = IntervalProcessor(
        topology=topology(dead_letter_retention_ms=HOUR_MS), computation="poison",
        interval=0, store=store, epoch=1, clock=clock,
    )  # fmt: skip
    worker = IntervalWorker(processor, WorkerHooks())
    acks: queue.SimpleQueue[delivery_pb2.DeliveryAck] = queue.SimpleQueue()
    worker.start()
    try:
        worker.deliver(DeliveryWork(poison_batch(1, 1, 2), acks.put))
        assert len(acks.get(timeout=30).committed_ids) == 2
        assert len(processor.dead_letters()) == 2
        clock.advance(HOUR_MS // 2)
        worker.deliver(DeliveryWork(poison_batch(2, 3), acks.put))
        assert len(acks.get(timeout=30).committed_ids) == 1
        assert len(processor.dead_letters()) == 3
        # An hour after the first two failed, the next sweep deletes them (not the third).
        clock.advance(HOUR_MS // 2 + LETTER_SWEEP_MS)
        wait_until(lambda: len(processor.dead_letters()) == 1, 30, "the first two to go")
        (left,) = processor.dead_letters()
        assert left.record.record_id == bytes([3]) * 16
        clock.advance(HOUR_MS)
        wait_until(lambda: not processor.dead_letters(), 30, "the third to go")
    finally:
        worker.stop()
        store.close()


def test_a_retention_of_zero_keeps_them(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with StateStore.open_rocksdb(tmp_path / "s") as store:
        processor = IntervalProcessor(
            topology=topology(dead_letter_retention_ms=0), computation="poison",
            interval=0, store=store, epoch=1, clock=clock,
        )  # fmt: skip
        processor.process_records(poison_batch(1, 1).records)
        clock.advance(10 * 365 * 24 * HOUR_MS)
        assert processor.expire_dead_letters() == 0
        assert len(processor.dead_letters()) == 1


def test_a_negative_retention_is_refused() -> None:
    with pytest.raises(TopologyError, match="dead_letter_retention_ms must be an integer >= 0"):
        topology(dead_letter_retention_ms=-1)


def test_the_store_is_checked_for_tombstone_files_every_half_minute(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with StateStore.open_rocksdb(tmp_path / "s") as store:
        processor = IntervalProcessor(
            topology=topology(), computation="poison", interval=0, store=store, epoch=1,
            clock=clock,
        )  # fmt: skip
        fill_outbox_with_tombstone_files(store)
        assert store._engine.file_count(Column.OUTBOX) > COMPACTION_FILES
        assert processor.compact_store() == []  # not at start: a restart loop would repeat it
        clock.advance(COMPACTION_CHECK_MS)
        assert processor.compact_store() == ["outbox"]
        # The outbox column's own files (the state column's come and go with compactions).
        assert store._engine.file_count(Column.OUTBOX) <= 1
        clock.advance(COMPACTION_CHECK_MS)
        assert processor.compact_store() == []  # few files: nothing to do
