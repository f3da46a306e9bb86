"""The in-process harness runs the real processor code: exactly-once through crashes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from millrace.computations import (
    JSON,
    Computation,
    Context,
    FiredTimer,
    Record,
    TimeDomain,
    Topology,
)
from millrace.computations.testing import TestHarness, UserCodeError
from millrace.engine import state_key
from millrace.engine._failures import HOLD_TIMEOUT_MS
from millrace.engine._processor import IntervalProcessor
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import record_pb2
from tests.workloads import (
    WINDOW_MS,
    expected_totals,
    totals_from_outputs,
    two_stage_topology,
)


def random_events(seed: int, count: int, keys: int = 20) -> list[tuple[bytes, int]]:
    rng = random.Random(seed)
    return [
        (f"user{rng.randrange(keys)}".encode(), rng.randrange(0, 6 * WINDOW_MS))
        for _ in range(count)
    ]


def test_two_stage_windows_close_on_the_watermark() -> None:
    harness = TestHarness(two_stage_topology())
    events = random_events(1, 500)
    for key, ts in events:
        harness.feed("events", key, b"", ts)
    harness.run()
    assert harness.outputs("window_totals") == [], "nothing closes before the watermark moves"
    harness.advance_watermark(3 * WINDOW_MS)
    closed = totals_from_outputs(r.value for r in harness.outputs("window_totals"))
    assert sorted(closed) == [0, WINDOW_MS, 2 * WINDOW_MS]
    harness.advance_watermark(10 * WINDOW_MS)
    got = totals_from_outputs(r.value for r in harness.outputs("window_totals"))
    assert got == expected_totals(events)


def test_watermarks_are_held_by_pending_work() -> None:
    harness = TestHarness(two_stage_topology())
    harness.advance_watermark(20)
    harness.feed("events", b"a", b"", 5)
    marks = harness.watermarks()
    assert marks["counts"].input_ms == 5, "an unacknowledged source record holds the source"
    harness.run()
    marks = harness.watermarks()
    assert marks["counts"].input_ms == 20
    assert marks["counts"].low_ms == 20
    harness.advance_watermark(WINDOW_MS + 20)
    assert harness.watermarks()["totals"].input_ms == WINDOW_MS + 20
    harness.feed("events", b"a", b"", 2 * WINDOW_MS + 1)
    harness.run()
    harness.advance_watermark(5 * WINDOW_MS)
    marks = harness.watermarks()
    assert marks["counts"].low_ms == 5 * WINDOW_MS, "the fired window's output was acked"
    assert marks["totals"].input_ms == 5 * WINDOW_MS


def test_crashes_between_any_steps_and_duplicates_change_nothing() -> None:
    events = random_events(2, 300)
    expected = expected_totals(events)
    for seed in range(5):
        rng = random.Random(seed)
        harness = TestHarness(two_stage_topology())
        ids = [harness.feed("events", key, b"", ts) for key, ts in events]
        for rid in rng.sample(ids, 40):  # duplicate deliveries of some records
            key, ts = events[ids.index(rid)]
            harness.feed("events", key, b"", ts, record_id=rid)
        steps = 0
        marks = sorted(rng.sample(range(1, 7), 3))
        while True:
            if rng.random() < 0.02:
                harness.crash()
            if not harness.step():
                if marks:
                    harness.advance_watermark(
                        marks.pop(0) * WINDOW_MS
                    ) if rng.random() < 0.5 else None
                    harness.crash()
                    continue
                break
            steps += 1
        harness.advance_watermark(100 * WINDOW_MS)
        got = totals_from_outputs(r.value for r in harness.outputs("window_totals"))
        assert got == expected, f"seed {seed}"


class Ordered(Computation):
    """Records the order its timers fire in."""

    def process_record(self, ctx: Context, record: Record) -> None:
        for offset in (30, 10, 20):
            ctx.set_timer(f"t{offset}", record.event_time_ms + offset)
        ctx.set_timer("p", 1_000, TimeDomain.PROCESSING_TIME)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        fired = ctx.get_state("fired", JSON) or []
        ctx.put_state("fired", [*fired, timer.tag], JSON)
        ctx.produce("out", ctx.key, timer.tag.encode(), max(timer.time_ms, 0))


def ordered_topology() -> Topology:
    return Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}},
            "computations": {
                "ordered": {
                    "handler": "tests.computations_api.test_harness:Ordered",
                    "inputs": {"in": "key"},
                    "outputs": ["out"],
                }
            },
        }
    )


def test_timers_fire_in_time_order_once() -> None:
    harness = TestHarness(ordered_topology())
    harness.feed("in", b"k", b"", 100)
    harness.run()
    harness.advance_watermark(125)
    assert harness.state("ordered", b"k", "fired", JSON) == ["t10", "t20"]
    harness.crash()
    harness.advance_watermark(10_000)
    assert harness.state("ordered", b"k", "fired", JSON) == ["t10", "t20", "t30"]
    harness.advance_processing_time(999)
    assert harness.state("ordered", b"k", "fired", JSON) == ["t10", "t20", "t30"]
    harness.advance_processing_time(1)
    assert harness.state("ordered", b"k", "fired", JSON) == ["t10", "t20", "t30", "p"]
    assert [r.value for r in harness.outputs("out")] == [b"t10", b"t20", b"t30", b"p"]


def in_to_ok(name: str, handler: str, **settings: object) -> Topology:
    """One computation ``name`` (one interval) reading ``in`` and producing ``ok``."""
    spec = {"handler": handler, "intervals": 1, "inputs": {"in": "key"}, "outputs": ["ok"]}
    return Topology.from_dict(
        {"streams": {"in": {}, "ok": {}}, "computations": {name: {**spec, **settings}}}
    )


def test_poison_record_is_dead_lettered_and_others_proceed() -> None:
    topology = in_to_ok("poison", "tests.workloads:Poison", max_attempts=3)
    harness = TestHarness(topology, dead_letters=True)
    harness.feed("in", b"a", b"fine", 1)
    harness.feed("in", b"bad", b"poison", 2)
    harness.feed("in", b"a", b"fine again", 3)
    harness.feed("in", b"bad", b"fine too", 4)
    harness.run()
    letters = harness.dead_letters("poison")
    assert len(letters) == 1
    assert letters[0].record.value == b"poison"
    assert letters[0].attempts == 3
    assert "ValueError: cannot digest b'poison'" in letters[0].error
    assert harness.state("poison", b"a", "n", JSON) == 2
    assert harness.state("poison", b"bad", "n", JSON) == 1, "the failing call changed nothing"
    assert [r.value for r in harness.outputs("ok")] == [b"fine", b"fine again", b"fine too"]


def test_a_retried_record_keeps_its_place_among_its_keys_records() -> None:
    harness = TestHarness(in_to_ok("once", "tests.workloads:FailsOnce", max_attempts=3))
    for ts, (key, value) in enumerate(
        [(b"k", b"v1"), (b"k", b"flaky"), (b"j", b"x"), (b"k", b"v3"), (b"k", b"v4")]
    ):
        harness.feed("in", key, value, ts)
    harness.run()
    # The failed record is retried after v3 and v4 arrived; they wait for it.
    assert harness.state("once", b"k", "seen", JSON) == ["v1", "flaky", "v3", "v4"]
    assert harness.state("once", b"j", "seen", JSON) == ["x"], "other keys do not wait"
    assert [r.value for r in harness.outputs("ok") if r.key == b"k"] == [
        b"v1", b"flaky", b"v3", b"v4"
    ]  # fmt: skip
    assert harness.dead_letters("once") == []


def test_a_key_waits_for_its_failed_record_only_until_the_hold_lapses(tmp_path: Path) -> None:
    topology = in_to_ok("once", "tests.workloads:FailsOnce")
    now = [1_000]
    store = StateStore.open_rocksdb(tmp_path / "s", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=topology, computation="once", interval=0, store=store, epoch=1,
        clock=lambda: now[0],
    )  # fmt: skip
    flaky, later = (
        record_pb2.Record(record_id=bytes([i]) * 16, key=b"k", value=v, stream="in")
        for i, v in ((1, b"flaky"), (2, b"later"))
    )
    assert processor.process_records([flaky]).retry == [flaky.record_id]
    assert processor.process_records([later]).retry == [later.record_id], "held"
    now[0] += HOLD_TIMEOUT_MS + 1  # the failed record never came back
    assert processor.process_records([later]).committed == [later.record_id]
    store.close()


def test_a_failed_timer_fires_again_before_its_keys_later_timers() -> None:
    topology = in_to_ok("timers", "tests.workloads:FlakyTimers", max_attempts=3)
    harness = TestHarness(topology, dead_letters=True)
    harness.feed("in", b"k", b"timers:flaky@10,t2@20", 0)
    harness.feed("in", b"j", b"timers:j1@15", 0)
    harness.run()
    harness.advance_watermark(100)
    assert harness.state("timers", b"k", "seen", JSON) == ["flaky", "t2"]
    assert harness.state("timers", b"j", "seen", JSON) == ["j1"]
    assert harness.dead_letters("timers") == []


def test_a_poison_timer_is_dead_lettered_then_its_key_goes_on() -> None:
    topology = in_to_ok("timers", "tests.workloads:FlakyTimers", max_attempts=3)
    harness = TestHarness(topology, dead_letters=True)
    harness.feed("in", b"k", b"timers:poison@10,t2@20", 0)
    harness.run()
    harness.advance_watermark(100)
    (letter,) = harness.dead_letters("timers")
    assert letter.attempts == 3
    assert "RuntimeError: timer poison failed" in letter.error
    assert letter.record.stream == "timer:poison"
    assert harness.state("timers", b"k", "seen", JSON) == ["t2"]


def test_timers_before_1970_fire_and_a_poison_one_is_dead_lettered() -> None:
    """Event times before the Unix epoch are valid, and so are timers at them."""
    topology = in_to_ok("timers", "tests.workloads:FlakyTimers", max_attempts=3)
    harness = TestHarness(topology, dead_letters=True)
    harness.feed("in", b"k", b"timers:flaky@-3000,poison@-2000,t3@-1000", -5_000)
    harness.run()
    harness.advance_watermark(0)
    assert harness.state("timers", b"k", "seen", JSON) == ["flaky", "t3"]
    (letter,) = harness.dead_letters("timers")
    assert letter.record.event_time_ms == -7_000
    assert letter.record.stream == "timer:poison"


def test_a_record_held_behind_a_failure_is_retried_in_every_copy(tmp_path: Path) -> None:
    """A record delivered twice in one group commit, behind a record of its key that
    fails: both copies are retried, neither is acked as a duplicate (which would lose
    it: the sender stops resending what is acked)."""
    topology = in_to_ok("once", "tests.workloads:FailsOnce")
    store = StateStore.open_rocksdb(tmp_path / "s", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=topology, computation="once", interval=0, store=store, epoch=1
    )
    flaky, later = (
        record_pb2.Record(record_id=bytes([i]) * 16, key=b"k", value=v, stream="in")
        for i, v in ((1, b"flaky"), (2, b"later"))
    )
    outcome = processor.process_records([flaky, later, later])
    assert outcome.retry == [flaky.record_id, later.record_id, later.record_id]
    assert outcome.duplicates == [] and outcome.committed == []
    outcome = processor.process_records([flaky, later, later])
    assert outcome.committed == [flaky.record_id, later.record_id]
    assert outcome.duplicates == [later.record_id]
    store.close()


def test_a_failed_timer_holds_its_keys_records(tmp_path: Path) -> None:
    topology = in_to_ok("timers", "tests.workloads:FlakyTimers")
    store = StateStore.open_rocksdb(tmp_path / "s", config=StoreConfig(sync=True))
    processor = IntervalProcessor(
        topology=topology, computation="timers", interval=0, store=store, epoch=1
    )
    records = [
        record_pb2.Record(record_id=bytes([i]) * 16, key=key, value=value, stream="in")
        for i, (key, value) in enumerate(
            [(b"k", b"timers:flaky@10"), (b"k", b"after"), (b"j", b"other")]
        )
    ]
    setter, after, other = records
    assert processor.process_records([setter]).committed == [setter.record_id]
    processor.advance_watermark(100)
    assert processor.fire_timers().timers_failed == 1
    outcome = processor.process_records([after, other])
    assert outcome.retry == [after.record_id], "k waits for its timer's retry"
    assert outcome.committed == [other.record_id], "other keys do not"
    assert processor.fire_timers().timers_fired == 1
    assert processor.process_records([after]).committed == [after.record_id]
    raw = store.get(state_key(b"k", "seen"))
    assert raw is not None and json.loads(raw) == ["flaky", "after"]
    store.close()


@pytest.mark.parametrize("crash_every", [3, 7])
def test_outputs_are_exactly_once_across_crashes(crash_every: int) -> None:
    harness = TestHarness(ordered_topology())
    for i in range(20):
        harness.feed("in", f"k{i % 4}".encode(), b"", i * 100)
    steps = 0
    while harness.step():
        steps += 1
        if steps % crash_every == 0:
            harness.crash()
    harness.advance_watermark(100_000)
    harness.advance_processing_time(5_000)
    values = [json.dumps([r.key.decode(), r.value.decode()]) for r in harness.outputs("out")]
    assert len(values) == 4 * 4, "every key: three event timers and one processing timer"


def test_the_harness_delivers_whole_batches_in_group_commits() -> None:
    """Records fed before a run wait in flight as separate batches; one step hands every
    batch for an interval to one turn of its driver: one commit for all of them."""
    harness = TestHarness(two_stage_topology())
    events = random_events(3, 40, keys=4)
    for key, ts in events:
        harness.feed("events", key, b"", ts)
    assert harness.in_flight() == 40
    assert harness.step()
    assert harness.group_commits == 1, "one turn committed several fed batches at once"
    assert harness.in_flight() < 40 - 1, "the step took more than one batch"
    harness.run()
    harness.advance_watermark(10 * WINDOW_MS)
    got = totals_from_outputs(r.value for r in harness.outputs("window_totals"))
    assert got == expected_totals(events)


class _JsonEcho(Computation):
    def process_record(self, ctx: Context, record: Record) -> None:
        seen = ctx.get_state("seen", JSON) or 0
        ctx.put_state("seen", seen + 1, JSON)
        ctx.produce("out", ctx.key, {"n": seen + 1, "raw": record.value.decode()}, serde=JSON)


def test_produce_encodes_with_a_serde_as_state_does() -> None:
    topology = Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}},
            "computations": {
                "echo": {
                    "handler": f"{__name__}:_JsonEcho",
                    "inputs": {"in": "key"},
                    "outputs": ["out"],
                }
            },
        }
    )
    harness = TestHarness(topology)
    harness.feed("in", b"k", b"a", 1)
    harness.feed("in", b"k", b"b", 2)
    harness.run()
    values = [json.loads(r.value) for r in harness.outputs("out")]
    assert values == [{"n": 1, "raw": "a"}, {"n": 2, "raw": "b"}]
    assert harness.state("echo", b"k", "seen", JSON) == 2
    assert harness.state("echo", b"k", "seen") == b"2"


def test_user_code_that_fails_for_good_fails_the_test() -> None:
    """Issue 36: a test that does not look at the dead letters must not pass with no
    output; the harness raises with the user's error."""
    harness = TestHarness(in_to_ok("poison", "tests.workloads:Poison", max_attempts=2))
    harness.feed("in", b"k", b"poison", 1)
    with pytest.raises(UserCodeError, match="computation 'poison' gave up on 1 record"):
        harness.run()
