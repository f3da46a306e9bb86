"""The user API is pinned: ``computations`` exports user-facing names only."""

from __future__ import annotations

from millrace import computations
from millrace.computations import testing


def test_the_user_api_is_pinned() -> None:
    assert sorted(computations.__all__) == sorted(
        [
            "BYTES", "JSON", "BytesSerde", "JsonSerde", "ProtobufSerde", "Serde",
            "Computation", "Context", "BatchContext", "TimerBatchContext", "Record", "FiredTimer",
            "RecordColumns", "record_columns", "TimeDomain",
            "Topology", "ComputationSpec", "InputSpec", "KeyExtractor",
            "IntervalId", "KeyInterval", "Layout",
            "import_object", "interval_of", "intervals_of", "key_hash",
            "ProduceError", "TimerError", "TopologyError",
            "MIN_TIME", "MAX_TIME", "MIN_EVENT_TIME_MS", "MAX_EVENT_TIME_MS", "MAX_PRODUCED_BYTES",
        ]
    )  # fmt: skip
    for name in computations.__all__:
        assert getattr(computations, name) is not None, name


def test_the_harness_is_where_users_find_it() -> None:
    assert testing.TestHarness.__module__ == "millrace.computations.testing"
