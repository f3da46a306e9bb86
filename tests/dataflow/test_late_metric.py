"""Records past the allowed lateness are reported with their lateness (the node's
``millrace_late_record_lateness_seconds`` histogram), exactly those that go to the
late side output, whichever path (vectorized or per record) took their batch."""

from __future__ import annotations

from millrace.computations import Topology
from millrace.computations.testing import TestHarness


def _topology(vectorized: bool) -> Topology:
    params = {
        "window": "tumbling:1000", "aggregate": "count", "output": "out",
        "late_output": "late", "allowed_lateness_ms": 500, "vectorized": vectorized,
    }  # fmt: skip
    return Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}, "late": {}},
            "computations": {
                "agg": {
                    "handler": "millrace.dataflow:WindowedAggregation",
                    "inputs": {"in": "key"},
                    "outputs": ["out", "late"],
                    "params": params,
                }
            },
        }
    )


def test_each_record_on_the_late_stream_is_reported_with_its_lateness() -> None:
    for vectorized in (True, False):
        harness = TestHarness(_topology(vectorized))
        harness.feed_many("in", [(b"a", b"{}", t) for t in (100, 900, 1_200)])
        harness.run()
        harness.advance_watermark(3_000)  # [0, 1000) expired at 1499, [1000, 2000) at 2499
        harness.feed_many("in", [(b"a", b"{}", 50), (b"b", b"{}", 1_999), (b"a", b"{}", 3_100)])
        harness.run()
        late = [r.event_time_ms for r in harness.outputs("late")]
        assert sorted(late) == [50, 1_999]
        watermark = harness.watermarks()["agg"].input_ms
        assert sorted(harness.reported_late("agg")) == sorted(watermark - t for t in late)
