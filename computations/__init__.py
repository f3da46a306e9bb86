"""The Millrace user API and computation runtime.

Write a computation::

    from computations import Computation, Context, Record, FiredTimer, JSON

    class WindowCounts(Computation):
        def process_record(self, ctx: Context, record: Record) -> None:
            end = (record.timestamp_ms // 60_000 + 1) * 60_000
            ctx.put_state(f"w{end}", (ctx.get_state(f"w{end}", JSON) or 0) + 1, JSON)
            ctx.set_timer(f"w{end}", end - 1)

        def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
            ctx.produce("counts", ctx.key, str(ctx.get_state(timer.tag, JSON)).encode())
            ctx.delete_state(timer.tag)

describe the topology (:class:`Topology`), test it in-process with
:class:`computations.testing.TestHarness`, and deploy it on nodes.
The user API and topology import nothing from gRPC or RocksDB.
"""

from computations._computation import Computation, Context
from computations._keys import interval_of, key_hash
from computations._outcome import BatchOutcome
from computations._processor import IntervalProcessor
from computations._records import FiredTimer, Record
from computations._serde import BYTES, JSON, BytesSerde, JsonSerde, ProtobufSerde, Serde
from computations._topology import ComputationSpec, InputSpec, Topology
from computations._watermarks import (
    MAX_EVENT_TIME_MS,
    MAX_TIME,
    MIN_EVENT_TIME_MS,
    MIN_TIME,
    ComputationWatermark,
    compute_watermarks,
)
from computations.errors import ProduceError, TimerError, TopologyError
from statestore.types import TimeDomain

__all__ = [
    "BYTES",
    "JSON",
    "MAX_EVENT_TIME_MS",
    "MAX_TIME",
    "MIN_EVENT_TIME_MS",
    "MIN_TIME",
    "BatchOutcome",
    "BytesSerde",
    "Computation",
    "ComputationSpec",
    "ComputationWatermark",
    "Context",
    "FiredTimer",
    "InputSpec",
    "IntervalProcessor",
    "JsonSerde",
    "ProduceError",
    "ProtobufSerde",
    "Record",
    "Serde",
    "TimeDomain",
    "TimerError",
    "Topology",
    "TopologyError",
    "compute_watermarks",
    "interval_of",
    "key_hash",
]
