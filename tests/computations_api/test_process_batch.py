"""The ``process_batch`` contract, as the engine enforces it: what a batch call did
is kept only for the keys it took whole; a key with a left record, a call that
raises, produces or returns something else goes one record at a time, and nothing
is counted twice."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from millrace.computations import (
    JSON,
    BatchContext,
    Computation,
    Context,
    FiredTimer,
    Record,
)
from millrace.computations.testing import TestHarness
from tests.computations_api._one_computation import harness_of


class Counting(Computation):
    """Counts records per key; ``process_batch`` behaves per the class's ``mode``."""

    mode = "take"

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
        ctx.put_state("via", "record", JSON)

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        for record in records:
            ctx = batch.for_key(record.key)
            ctx.put_state("n", (ctx.get_state("n", JSON) or 0) + 1, JSON)
            ctx.put_state("via", "batch", JSON)
        if self.mode == "raise":
            raise RuntimeError("boom")
        if self.mode == "produce":
            batch.for_key(records[0].key).produce("out", b"k", b"v")
        if self.mode == "garbage":
            return 42  # type: ignore[return-value]
        if self.mode == "leave_b":
            return [r for r in records if r.key == b"b"][:1]  # one of b's records
        return ()


def _run(mode: str) -> TestHarness:
    handler = type(f"Counting_{mode}", (Counting,), {"mode": mode})
    globals()[handler.__name__] = handler
    harness = harness_of(f"{__name__}:{handler.__name__}")
    harness.feed_many("in", [(k, b"x", t) for t, k in enumerate([b"a", b"b", b"a", b"b", b"c"])])
    harness.run()
    return harness


@pytest.mark.parametrize("mode", ["take", "raise", "produce", "garbage", "leave_b"])
def test_every_record_counts_once_whatever_process_batch_does(mode: str) -> None:
    harness = _run(mode)
    counts = {k: harness.state("c", k, "n", JSON) for k in (b"a", b"b", b"c")}
    assert counts == {b"a": 2, b"b": 2, b"c": 1}
    via = {k: harness.state("c", k, "via", JSON) for k in (b"a", b"b", b"c")}
    if mode == "take":
        assert set(via.values()) == {"batch"}
    elif mode == "leave_b":
        assert via == {b"a": "batch", b"b": "record", b"c": "batch"}
    else:
        assert set(via.values()) == {"record"}
    assert harness.outputs("out") == []


class BulkCounting(Computation):
    """Counts records per key through the bulk calls (``read_states``, ``write_states``,
    ``set_timers``), mixed with ``for_key`` for key ``b``; leaves key ``c``. Each key's
    timer emits its count."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("n", str(int(ctx.get_state("n") or b"0") + 1).encode())
        ctx.set_timer("t", 100)

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        counts: dict[bytes, int] = {}
        for record in records:
            counts[record.key] = counts.get(record.key, 0) + 1
        keys = list(counts)
        tags = ["n"] * len(keys)
        if b"b" in counts:  # a write through the key's context first: the bulk read sees it
            ctx = batch.for_key(b"b")
            ctx.put_state("n", str(int(ctx.get_state("n") or b"0") + 1).encode())
            counts[b"b"] -= 1
        stored = batch.read_states(keys, tags)
        written = [
            str(int(raw or b"0") + counts[k]).encode() for k, raw in zip(keys, stored, strict=True)
        ]
        batch.write_states(keys, tags, written)
        assert batch.read_states(keys, tags) == written
        for key, value in zip(keys, written, strict=True):
            assert batch.for_key(key).get_state("n") == value  # a context made after sees it
        batch.set_timers(keys, ["t"] * len(keys), [100] * len(keys))
        return [r for r in records if r.key == b"c"][:1]

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("out", ctx.key, ctx.get_state("n") or b"")


def test_bulk_state_and_timer_calls_equal_the_per_key_ones() -> None:
    harness = harness_of(f"{__name__}:BulkCounting")
    keys = [b"a", b"b", b"a", b"c", b"b", b"b", b"c", b"d"]
    harness.feed_many("in", [(k, b"x", t) for t, k in enumerate(keys)])
    harness.run()
    harness.feed_many("in", [(k, b"x", 10 + t) for t, k in enumerate(keys[:3])])
    harness.run()
    counts = {k: harness.state("c", k, "n") for k in (b"a", b"b", b"c", b"d")}
    assert counts == {b"a": b"4", b"b": b"4", b"c": b"2", b"d": b"1"}
    harness.advance_watermark(200)
    harness.run()
    fired = sorted((r.key, r.value) for r in harness.outputs("out"))
    assert fired == [(b"a", b"4"), (b"b", b"4"), (b"c", b"2"), (b"d", b"1")]
