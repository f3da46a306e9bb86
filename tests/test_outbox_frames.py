"""Outbox frames: one entry per destination per commit, deleted once all of it is acked.

Real RocksDB on disk. Checks the life of frames (what stays, what goes, what a
restart resends) and that stores written with one entry per production (the
format before frames) are still resent and cleared.
"""

from __future__ import annotations

import struct
from pathlib import Path

from engine import IntervalProcessor
from engine._outbox import is_frame_key, outbox_key
from millrace.wire.v1 import record_pb2
from statestore import StateStore
from tests.cluster import numbered_records
from tests.delivery_helpers import forwarding_processor


def _stored_keys(processor: IntervalProcessor) -> list[bytes]:
    return [key for key, _ in processor.store.outbox()]


def test_a_frame_leaves_the_outbox_when_its_last_production_is_acked(tmp_path: Path) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    first = processor.process_records(numbered_records(0, 40, keys=5)).productions
    second = processor.process_records(numbered_records(40, 30, keys=5)).productions
    frames = _stored_keys(processor)
    assert len(frames) == 2 and all(is_frame_key(k) for k in frames), "one frame per commit"
    assert len(processor.in_flight) == 70

    processor.acknowledge([p.outbox_key for p in first[:39]])
    assert _stored_keys(processor) == frames, "a frame with one unacked production stays"
    # The last ack rides along with the next commit.
    processor.acknowledge([first[39].outbox_key], flush=False)
    processor.process_records([])
    assert _stored_keys(processor) == frames[1:]
    assert len(processor.in_flight) == 30

    processor.acknowledge([p.outbox_key for p in second[::2]])
    processor.store.close()
    # After a restart the partly acked frame is resent whole (receivers drop duplicates).
    restarted = forwarding_processor(tmp_path / "s", epoch=2)
    assert [p.outbox_key for p in restarted.pending_productions()] == [p.outbox_key for p in second]
    restarted.acknowledge([p.outbox_key for p in second])
    assert _stored_keys(restarted) == [] and len(restarted.in_flight) == 0
    restarted.store.close()


def test_entries_of_the_older_per_production_format_are_resent_first(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "s")
    old = [
        record_pb2.Record(record_id=bytes([i]) * 16, key=b"k", value=b"v", stream="ok")
        for i in range(3)
    ]
    txn = store.begin(1)
    for seq, record in zip((2, 0, 1), old, strict=True):
        key = outbox_key("sink:ok", 0, record.record_id)
        txn.add_outbox(key, struct.pack(">Q", seq) + record.SerializeToString())
    txn.commit()
    store.close()

    processor = forwarding_processor(tmp_path / "s", epoch=2)
    new = processor.process_records(numbered_records(0, 4, keys=2)).productions
    pending = processor.pending_productions()
    assert [p.record.record_id for p in pending] == [
        old[1].record_id,
        old[2].record_id,
        old[0].record_id,
        *(p.record.record_id for p in new),
    ], "older entries in their sequence order, then frames"
    processor.acknowledge([p.outbox_key for p in pending])
    assert _stored_keys(processor) == []
    processor.store.close()


def test_deferred_frame_deletes_ride_with_the_next_commit(tmp_path: Path) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    first = processor.process_records(numbered_records(0, 10, keys=3)).productions
    processor.acknowledge([p.outbox_key for p in first], flush=False)
    assert len(processor.in_flight) == 0, "acked productions stop holding the watermark at once"
    assert len(_stored_keys(processor)) == 1, "the delete waits for a commit"
    processor.process_records(numbered_records(10, 5, keys=3))
    assert len(_stored_keys(processor)) == 1, "only the new frame is left"
    second = processor.pending_productions()
    processor.acknowledge([p.outbox_key for p in second], flush=False)
    processor.flush_acknowledged()
    assert _stored_keys(processor) == []
    processor.store.close()


def test_a_refused_production_is_dead_lettered_and_its_frame_still_leaves(
    tmp_path: Path,
) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    made = processor.process_records(numbered_records(0, 10, keys=3)).productions
    processor.refused(made[4], "WRONG_INTERVAL: not mine")
    [letter] = processor.dead_letters()
    assert letter.record.record_id == made[4].record.record_id
    assert letter.error == "refused by sink:ok/0: WRONG_INTERVAL: not mine"
    assert len(processor.in_flight) == 9 and len(_stored_keys(processor)) == 1
    processor.acknowledge([p.outbox_key for i, p in enumerate(made) if i != 4])
    assert _stored_keys(processor) == [] and len(processor.in_flight) == 0
    processor.store.close()
