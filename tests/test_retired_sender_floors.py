"""A retired sender's floor, told by its successor in a batch without records
(``SendProgress.retired``): a node's interval and both sinks note it under the retired
interval's name, say so in the ack (``progress_noted``), and no longer keep the dedup
segments that name delivered into; a batch they refuse notes nothing (real RocksDB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.engine import IntervalDriver, IntervalProcessor
from millrace.sinks import FileSink, ParquetSink
from millrace.statestore import MAX_EPOCH, StateStore, StoreConfig
from millrace.statestore._dedup_progress import ProgressBook
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.workloads import two_stage_topology

RETIRED = b"counts\x001\x00"


def _batch(
    target: str, *, index: int, epoch: int, records: int = 0, floor: int = 0, retired: int = -1
) -> delivery_pb2.DeliveryBatch:
    """From ``counts/index`` at ``epoch``: ``records`` records at positions 0..n-1, or a
    floor told for ``retired``."""
    batch = delivery_pb2.DeliveryBatch(
        batch_seq=7, target=record_pb2.KeyInterval(computation=target, index=0)
    )
    batch.sender.sender_id = "counts-1"
    batch.sender.epoch = epoch
    batch.sender.interval.computation = "counts"
    batch.sender.interval.index = index
    progress = batch.sender.progress
    progress.floor = floor
    if records:
        progress.first, progress.last = 0, records - 1
        for i in range(records):
            batch.records.add(
                record_id=b"r%d" % i, stream="window_counts", key=b"k",
                value=b'{"window": 0, "count": 1}', event_time_ms=1,
            )  # fmt: skip
    if retired >= 0:
        progress.retired.computation = "counts"
        progress.retired.index = retired
    return batch


def _holds(book: ProgressBook, name: bytes) -> bool:
    """Whether ``name`` keeps some dedup segment (a floor not past what it delivered)."""
    floor = book.floor(name)
    delivered = [book.delivered(segment) for segment in book.held()]
    return any(name in d and (floor is None or floor <= d[name]) for d in delivered)


def test_an_interval_notes_a_retired_senders_floor(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "totals", config=StoreConfig(sync=False))
    processor = IntervalProcessor(
        topology=two_stage_topology((2, 1)), computation="totals", interval=0,
        store=store, epoch=1,
    )  # fmt: skip
    driver = IntervalDriver(processor)

    def deliver(batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
        admission = driver.admit([batch])
        if admission.refused:
            return admission.refused[0][1]
        return driver.answer([batch], driver.process([batch]))[0]

    first = deliver(_batch("totals", index=1, epoch=2, records=5))
    assert len(first.committed_ids) == 5 and first.progress_noted
    assert _holds(store.dedup.progress, RETIRED)
    # counts/1 split: its lower half, counts/4 (epoch 3), tells counts/1's floor
    told = deliver(_batch("totals", index=4, epoch=3, floor=5, retired=1))
    assert told.progress_noted and not told.committed_ids
    assert store.dedup.progress.floor(RETIRED) == 5
    assert not _holds(store.dedup.progress, RETIRED)
    assert store.dedup.progress.floor(b"counts\x004\x00") is None, "not counts/4's own"
    # a sender of a stale epoch is refused: nothing noted
    deliver(_batch("totals", index=4, epoch=4, records=1))
    stale = deliver(_batch("totals", index=4, epoch=3, floor=9, retired=1))
    assert not stale.progress_noted
    assert store.dedup.progress.floor(RETIRED) == 5


@pytest.mark.parametrize("kind", ["file", "parquet"])
def test_a_sink_notes_a_retired_senders_floor(tmp_path: Path, kind: str) -> None:
    sink: FileSink | ParquetSink = (
        FileSink(tmp_path / "out.jsonl") if kind == "file" else ParquetSink(tmp_path / "out")
    )
    sink.stream = "totals"
    book = sink._index._store.dedup.progress  # what the index keeps
    first = sink.write(_batch("sink:totals", index=1, epoch=2, records=5))
    assert first.progress_noted and _holds(book, RETIRED)
    elsewhere = sink.write(_batch("sink:other", index=4, epoch=3, floor=5, retired=1))
    forged = sink.write(_batch("sink:totals", index=4, epoch=MAX_EPOCH, floor=5, retired=1))
    assert not elsewhere.progress_noted and not forged.progress_noted
    assert _holds(book, RETIRED)
    told = sink.write(_batch("sink:totals", index=4, epoch=3, floor=5, retired=1))
    assert told.progress_noted and not told.committed_ids
    assert book.floor(RETIRED) == 5 and not _holds(book, RETIRED)
    assert len(sink) == 5, "a told floor writes nothing"
