"""A split interval's store cut into its halves, and two halves merged back
(``engine/_interval_halves.py``), on real RocksDB: each half holds the state and timers
of its own keys, the lower half the productions not yet acknowledged, both the record
ids; the merged store all of both; running the input through the interval, its halves
after a split and the whole again after a merge gives exactly what the interval
unsplit gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from millrace.computations import (
    Computation,
    Context,
    FiredTimer,
    KeyInterval,
    Layout,
    Record,
    Topology,
)
from millrace.engine import IntervalProcessor, Production
from millrace.engine._frames import frame_seq
from millrace.engine._interval_halves import cut_to_half, merge_into
from millrace.statestore import StateStore, StoreConfig
from millrace.statestore.types import SenderProgress, TimeDomain
from millrace.wire.v1 import record_pb2


class SumUntilQuiet(Computation):
    """Sums each key's values; 50 ms of event time after a key's last record, emits the
    sum (event-time timer) and starts over; every record also echoes downstream."""

    def process_record(self, ctx: Context, record: Record) -> None:
        total = int(ctx.get_state("sum") or b"0") + int(record.value)
        ctx.put_state("sum", b"%d" % total)
        ctx.set_timer("quiet", record.event_time_ms + 50)
        ctx.produce("echo", record.key, record.value)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("sums", ctx.key, ctx.get_state("sum") or b"0")
        ctx.delete_state("sum")


TOPOLOGY = Topology.from_dict({
    "streams": {"in": {}, "echo": {}, "sums": {}},
    "computations": {
        "sum": {
            "handler": f"{__name__}:SumUntilQuiet",
            "inputs": {"in": "key"},
            "outputs": ["echo", "sums"],
        }
    },
})  # fmt: skip
CONFIG = StoreConfig(sync=False)


def _input(seed: int) -> list[record_pb2.Record]:
    rng = random.Random(seed)
    return [
        record_pb2.Record(
            record_id=b"r%d" % i,
            stream="in",
            key=b"k%d" % rng.randrange(60),
            value=b"%d" % rng.randrange(100),
            event_time_ms=10 * i,
        )
        for i in range(1200)
    ]


def _run(
    processors: dict[KeyInterval, IntervalProcessor], records: list[record_pb2.Record]
) -> dict[bytes, bytes]:
    """Productions by id: of each batch of 100 (each record to the interval that holds
    its key), then of the timers the batch's last time lets fire."""
    made: dict[bytes, bytes] = {}
    layout = Layout("sum", 1, processors)
    for at in range(0, len(records), 100):
        batch = records[at : at + 100]
        for interval, processor in processors.items():
            mine = [r for r in batch if layout.interval_for(r.key) == interval]
            made.update(_ids(processor.process_records(mine).productions))
            processor.advance_watermark(batch[-1].event_time_ms)
            while (fired := processor.fire_timers()).timers_fired:
                made.update(_ids(fired.productions))
    return made


def _ids(productions: list[Production]) -> dict[bytes, bytes]:
    return {p.record.record_id: p.record.SerializeToString() for p in productions}


def _processor(path: Path, epoch: int, interval: KeyInterval) -> IntervalProcessor:
    return IntervalProcessor(
        topology=TOPOLOGY, computation="sum", interval=interval.id(1),
        store=StateStore.open_rocksdb(path, config=CONFIG), epoch=epoch,
    )  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_halves_go_on_exactly_as_the_whole_would(tmp_path: Path, seed: int) -> None:
    records = _input(seed)
    whole = KeyInterval("sum", 0, 1)
    expected = _run({whole: _processor(tmp_path / "alone", 1, whole)}, records)

    before = _processor(tmp_path / "whole", 1, whole)
    made = _run({whole: before}, records[:600])
    pending = {p.record.record_id for p in before.pending_productions()}
    assert pending  # nothing was acknowledged: the outbox holds every production
    low, high = Layout.base("sum", 1).split(whole).intervals
    halves = _split(before, whole, tmp_path)
    lower, upper = halves[low], halves[high]
    assert {p.record.record_id for p in lower.pending_productions()} == pending
    assert not upper.pending_productions()  # each production is sent once, by the lower
    for half, processor in halves.items():
        keys = {key for key, _ in _state_keys(processor)}
        assert keys and all(half.holds(key) for key in keys)
        for timer in processor.store.due_timers(TimeDomain.EVENT_TIME, None):
            assert half.holds(timer.key)
    for processor in halves.values():
        # a record the interval committed before the split is a duplicate to either half
        again = processor.process_records(records[:5])
        assert len(again.duplicates) == 5 and not again.committed
    made.update(_run(halves, records[600:900]))
    pending = {p.record.record_id for h in halves.values() for p in h.pending_productions()}
    for processor in halves.values():
        processor.store.checkpoint(tmp_path / f"from-{processor.share.index}")
        processor.store.close()

    merged = tmp_path / "merged"
    (tmp_path / "from-0").rename(merged)
    whole_again = StateStore.open_rocksdb(merged, config=CONFIG)
    upper_store = StateStore.open_rocksdb(tmp_path / "from-1", config=CONFIG)
    merge_into(whole_again, upper_store, 3, halves=(1, 2))
    upper_store.close()
    whole_again.close()
    after = _processor(merged, 3, whole)
    frames = [frame_seq(key) for key, _ in after.store.outbox()]
    assert len(frames) == len(set(frames))
    assert {p.record.record_id for p in after.pending_productions()} == pending
    again = after.process_records(records[:5] + records[880:900])
    assert len(again.duplicates) == 25 and not again.committed
    made.update(_run({whole: after}, records[900:]))
    assert made == expected


def _split(
    before: IntervalProcessor, whole: KeyInterval, tmp_path: Path
) -> dict[KeyInterval, IntervalProcessor]:
    """``before``'s store (closed here) split as a node splits it: a checkpoint per half,
    each cut to its half, opened at epoch 2."""
    for half in whole.halves():
        before.store.checkpoint(tmp_path / f"half-{half.index}")
    before.store.close()
    halves = {}
    for half in whole.halves():
        store = StateStore.open_rocksdb(tmp_path / f"half-{half.index}", config=CONFIG)
        cut_to_half(store, half, 2, split=whole.id(1))
        store.close()
        halves[half] = _processor(tmp_path / f"half-{half.index}", 2, half)
    return halves


def _state_keys(processor: IntervalProcessor) -> list[tuple[bytes, bytes]]:
    found = []
    for raw, value in processor.store.scan_state_range(b"", b"\xff" * 12):
        length = int.from_bytes(raw[8:12], "big")
        found.append((raw[12 : 12 + length], value))
    return found


def test_absorbed_record_ids_are_kept_until_their_senders_pass_them(tmp_path: Path) -> None:
    upper = StateStore.open_rocksdb(tmp_path / "upper", config=CONFIG)
    whole = StateStore.open_rocksdb(tmp_path / "whole", config=CONFIG)
    txn = upper.begin(1)
    txn.mark_seen([b"x", b"y"])
    txn.note_progress([SenderProgress(b"sender", 3, 10)])
    txn.commit()
    whole.absorb(upper, 1)
    assert whole.begin(1).seen([b"x", b"y", b"z"]) == [True, True, False]
    segment = whole.dedup.segment_at(whole.dedup_now())
    assert whole.dedup.progress.delivered(segment) == {b"sender": 10}
    assert whole.dedup.progress.floor(b"sender") == 3
    assert not whole.dedup.progress.released(segment)


def test_the_store_that_takes_the_outbox_answers_for_the_retired_names(tmp_path: Path) -> None:
    """The lower half answers for the split interval's name as a sender (its floor: the
    frame numbers it used), once nothing inherited awaits an ack; the upper half for
    nothing; a merge answers for both halves' names."""
    records = _input(4)
    whole = KeyInterval("sum", 0, 1)
    before = _processor(tmp_path / "whole", 1, whole)
    _run({whole: before}, records[:300])
    frames = sorted(frame_seq(key) for key, _ in before.store.outbox())
    assert frames and before.retired_floors() == {}, "a first interval retired nobody"
    low, high = whole.halves()
    halves = _split(before, whole, tmp_path)
    lower, upper = halves[low], halves[high]
    assert upper.retired_floors() == {}
    assert lower.retired_floors() == {}, "its inherited frames await acks"
    _run(halves, records[300:400])  # frames of its own come after the inherited ones
    pending = lower.pending_frames()
    inherited = [
        k for f in pending if f.positions and f.positions[0] <= frames[-1] for k in f.outbox_keys
    ]
    lower.acknowledge(inherited[:-1])
    assert lower.retired_floors() == {}, "one inherited production still awaits its ack"
    lower.acknowledge(inherited[-1:])
    floors = lower.retired_floors()
    assert floors == {0: frames[-1] + 1}
    assert any(f.positions and f.positions[0] > frames[-1] for f in lower.pending_frames())
    lower.forget_retired(floors)
    assert lower.retired_floors() == {}
    for processor in halves.values():
        processor.store.checkpoint(tmp_path / f"from-{processor.share.index}")
        processor.store.close()
    whole_store = StateStore.open_rocksdb(tmp_path / "from-0", config=CONFIG)
    upper_store = StateStore.open_rocksdb(tmp_path / "from-1", config=CONFIG)
    lower_next, upper_next = (
        max(frame_seq(key) for key, _ in store.outbox()) + 1 for store in (whole_store, upper_store)
    )
    merge_into(whole_store, upper_store, 3, halves=(1, 2))
    upper_store.close()
    whole_store.close()
    merged = _processor(tmp_path / "from-0", 3, whole)
    assert merged.retired_floors() == {}
    merged.acknowledge([p.outbox_key for p in merged.pending_productions()])
    assert merged.retired_floors() == {1: lower_next, 2: upper_next}
