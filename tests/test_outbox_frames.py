"""Outbox frames: one entry per destination per commit, deleted once all of it is acked.

Real RocksDB on disk. Checks the life of frames (what stays, what goes, what a
restart resends), that a commit's records over a frame's byte budget go in several
frames, and that a store of the pre-release format (one entry per
production) is refused with a message rather than read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.engine import FRAME_BYTES, IntervalProcessor, decode_frame
from millrace.statestore import IncompatibleStoreError, StateStore
from millrace.statestore._engine import Column
from millrace.statestore._keys import reserved_meta_key
from millrace.statestore._rocksdb import RocksDBEngine
from tests.delivery_helpers import forwarding_processor
from tests.support import numbered_records


def _stored_keys(processor: IntervalProcessor) -> list[bytes]:
    return [key for key, _ in processor.store.outbox()]


def test_a_frame_leaves_the_outbox_when_its_last_production_is_acked(tmp_path: Path) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    first = processor.process_records(numbered_records(0, 40, keys=5)).productions
    second = processor.process_records(numbered_records(40, 30, keys=5)).productions
    frames = _stored_keys(processor)
    assert len(frames) == 2, "one frame per commit"
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


def test_a_commit_past_the_frame_budget_is_framed_in_several_in_order(tmp_path: Path) -> None:
    """Twenty 1 MiB records forwarded in one commit: frames stay within ``FRAME_BYTES``
    (each is one delivery message: gRPC refuses one over 64 MiB), in production order,
    and a restart resends them all in that order."""
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    records = numbered_records(0, 20, keys=1)
    for record in records:
        record.value = b"%d " % record.event_time_ms + b"x" * (1 << 20)
    made = processor.process_records(records).productions
    stored = [value for _, value in processor.store.outbox()]
    assert len(stored) >= 3
    assert all(len(value) <= FRAME_BYTES for value in stored)
    framed = [p.record.value for value in stored for p in decode_frame(value).productions]
    assert framed == [r.value for r in records] == [p.record.value for p in made]
    processor.store.close()
    restarted = forwarding_processor(tmp_path / "s", epoch=2)
    resent = [p.record.value for p in restarted.pending_productions()]
    assert resent == [r.value for r in records]
    restarted.store.close()


def test_a_store_of_the_pre_release_format_is_refused_with_a_message(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "s")
    store.close()
    engine = RocksDBEngine(tmp_path / "s")  # rewrite the format marker as format 1 had it
    batch = engine.new_batch()
    batch.put(Column.META, reserved_meta_key("format"), b"1")
    engine.write(batch, sync=True)
    engine.close()
    with pytest.raises(IncompatibleStoreError, match="1"):
        StateStore.open_rocksdb(tmp_path / "s")


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
