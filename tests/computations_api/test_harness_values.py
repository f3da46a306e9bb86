"""The harness takes and gives Python values through a serde (issue 36)."""

from __future__ import annotations

import json

import pytest

from millrace.computations import JSON, Computation, Context, Record, Topology
from millrace.computations.testing import TestHarness


class Doubler(Computation):
    """Doubles the ``n`` of each JSON record."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.produce("out", ctx.key, {"n": 2 * json.loads(record.value)["n"]}, serde=JSON)


def doubler() -> TestHarness:
    return TestHarness(
        Topology.from_dict({
            "streams": {"in": {}, "out": {}},
            "computations": {"d": {"handler": Doubler, "inputs": {"in": "key"},
                                   "outputs": ["out"]}},
        })
    )  # fmt: skip


def test_python_values_in_and_out_through_a_serde() -> None:
    harness = doubler()
    harness.feed("in", "alice", {"n": 2}, 1_000, serde=JSON)
    harness.feed_many("in", [("bob", {"n": 5}, 2_000)], serde=JSON)
    harness.run()
    assert harness.output_values("out", JSON) == [{"n": 4}, {"n": 10}]
    assert [r.key for r in harness.outputs("out")] == [b"alice", b"bob"]


def test_a_value_that_is_not_bytes_needs_a_serde() -> None:
    harness = doubler()
    with pytest.raises(TypeError, match="the value must be bytes, not dict: pass serde=JSON"):
        harness.feed("in", b"alice", {"n": 2}, 1_000)
    with pytest.raises(TypeError, match="the key must be bytes, not int"):
        harness.feed("in", 7, b"{}", 1_000)  # type: ignore[arg-type]
