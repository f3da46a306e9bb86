"""The ``process_batch`` contract, as the engine enforces it: what a batch call did
is kept only for the keys it took whole; a key with a left record, a call that
raises, produces or returns something else goes one record at a time, and nothing
is counted twice."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from computations import JSON, BatchContext, Computation, Context, Record, Topology
from computations.testing import TestHarness


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
    harness = TestHarness(
        Topology.from_dict(
            {
                "streams": {"in": {}, "out": {}},
                "computations": {
                    "c": {
                        "handler": f"{__name__}:{handler.__name__}",
                        "inputs": {"in": "key"},
                        "outputs": ["out"],
                    }
                },
            }
        )
    )
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
