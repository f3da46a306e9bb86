"""Timer fires are named without per-key counters (issue 30: no bookkeeping row per key
outlives the key's state), and two fires never share a name.

An event-time timer set for after every time the store's timers fired up to is named
by the timer alone (it fires there once: the watermark never goes back); one set for a
time that may have fired is named by what set it (a record is processed once, a fire
happens once). Real RocksDB on disk; a restart is a closed and reopened store.
"""

from __future__ import annotations

from pathlib import Path

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.engine._processor import IntervalProcessor
from millrace.engine._production_ids import RETIRED_TIMER_FIRES_PREFIX
from millrace.statestore import StateStore, TimeDomain, Timer
from millrace.statestore._engine import Column
from millrace.statestore._keys import reserved_meta_key
from millrace.wire.v1 import record_pb2
from tests.workloads import two_stage_topology


def test_keys_whose_windows_fired_leave_no_rows_behind() -> None:
    harness = TestHarness(two_stage_topology((1, 1)))
    for i in range(300):
        harness.feed("events", b"user%d" % (i % 50), b"", i * 700)
    harness.run()
    harness.advance_watermark(MAX_TIME)
    assert len(harness.outputs("window_totals")) == 21
    for (name, _), processor in harness.processors.items():
        rows = list(processor.store.scan_state(b""))
        assert rows == [], f"{name} keeps {len(rows)} rows, e.g. {rows[:2]}"


def past_timer_topology() -> Topology:
    return Topology.from_dict(
        {
            "streams": {"in": {}, "fired": {}},
            "computations": {
                "past": {
                    "handler": "tests.workloads:PastTimer",
                    "inputs": {"in": "key"},
                    "outputs": ["fired"],
                }
            },
        }
    )


def _processor(path: Path) -> IntervalProcessor:
    store = StateStore.open_rocksdb(path)
    return IntervalProcessor(
        topology=past_timer_topology(), computation="past", interval=0, store=store, epoch=1
    )


def _fire_one(processor: IntervalProcessor, record_id: bytes) -> list[bytes]:
    """Process one record of key ``k`` (setting timer ``t`` at 0) and fire what is due;
    the ids of what the fire produced."""
    record = record_pb2.Record(record_id=record_id, key=b"k", value=b"", stream="in")
    processor.process_records([record])
    processor.advance_watermark(1_000)
    outcome = processor.fire_timers()
    assert outcome.timers_fired == 1
    return [p.record.record_id for p in outcome.productions]


def test_a_timer_fired_again_at_its_time_is_named_anew_across_restarts(tmp_path: Path) -> None:
    first = _processor(tmp_path / "s")
    ids = _fire_one(first, b"a" * 16)
    ids += _fire_one(first, b"b" * 16)  # set again at 0, which fired
    first.store.close()
    again = _processor(tmp_path / "s")  # no watermark known yet after the restart
    ids += _fire_one(again, b"c" * 16)
    again.store.close()
    assert len(ids) == 3 and len(set(ids)) == 3, ids


def test_a_store_of_format_2_is_read_and_its_counters_swept(tmp_path: Path) -> None:
    store = StateStore.open_rocksdb(tmp_path / "s")
    txn = store.begin(1)
    txn.set_timer(Timer(TimeDomain.EVENT_TIME, b"k", "t", 5))  # a cause-less entry, as 2 wrote
    txn.put(RETIRED_TIMER_FIRES_PREFIX + b"k", (3).to_bytes(8, "big"))
    txn.commit()
    batch = store._engine.new_batch()
    batch.put(Column.META, reserved_meta_key("format"), b"2")
    store._engine.write(batch, sync=True)
    store.close()

    processor = _processor(tmp_path / "s")
    assert processor.store._engine.get(Column.META, reserved_meta_key("format")) == b"3"
    processor.advance_watermark(1_000)
    outcome = processor.fire_timers()
    assert outcome.timers_fired == 1 and len(outcome.productions) == 1
    processor.expire_dead_letters()  # the store's sweep: retired counters go too
    assert list(processor.store.scan_state(RETIRED_TIMER_FIRES_PREFIX)) == []
    processor.store.close()
