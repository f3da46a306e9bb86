"""Production ids depend on what happened to a key, not on how the run was cut up:
the same input through 1, 2 or 3 intervals (so in other group commits) gives sink
records with the same ids (what lets a backfill and the nodes agree, and sinks
deduplicate a replay)."""

from __future__ import annotations

import random

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness


def _topology(intervals: int) -> Topology:
    params = {"window": "tumbling:100", "aggregate": "count", "output": "out",
              "allowed_lateness_ms": 50, "early_every_records": 3}  # fmt: skip
    return Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}},
            "computations": {
                "agg": {
                    "handler": "millrace.dataflow:WindowedAggregation",
                    "intervals": intervals,
                    "inputs": {"in": "key"},
                    "outputs": ["out"],
                    "params": params,
                }
            },
        }
    )


def _sink_ids(intervals: int, step: int) -> dict[bytes, bytes]:
    rng = random.Random(5)
    harness = TestHarness(_topology(intervals))
    events = [(f"k{rng.randrange(7)}".encode(), rng.randrange(1_000)) for _ in range(300)]
    for n, (key, ts) in enumerate(events):
        harness.feed("in", key, b"{}", ts, record_id=f"r{n}".encode())
        if n % step == 0:
            harness.advance_watermark(ts - 200)
    harness.advance_watermark(MAX_TIME)
    return {r.record_id: r.value for r in harness.outputs("out")}


def test_timer_and_record_production_ids_do_not_depend_on_the_interval_count() -> None:
    reference = _sink_ids(intervals=1, step=10)
    assert len(reference) > 50
    assert _sink_ids(intervals=3, step=10) == reference
    assert _sink_ids(intervals=2, step=10) == reference
