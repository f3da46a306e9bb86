"""The Millrace user API: computations, their records, state serdes and the topology.

Write a computation::

    from millrace.computations import Computation, Context, Record, FiredTimer, JSON

    class WindowCounts(Computation):
        def process_record(self, ctx: Context, record: Record) -> None:
            end = (record.event_time_ms // 60_000 + 1) * 60_000
            ctx.put_state(f"w{end}", (ctx.get_state(f"w{end}", JSON) or 0) + 1, JSON)
            ctx.set_timer(f"w{end}", end - 1)

        def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
            ctx.produce("counts", ctx.key, str(ctx.get_state(timer.tag, JSON)).encode())
            ctx.delete_state(timer.tag)

describe the topology (:class:`Topology`), test it in-process with
:class:`computations.testing.TestHarness`, and deploy it on nodes. This
package imports nothing from gRPC or RocksDB; the engine that runs it is
``engine``, the process that hosts it ``node``.
"""

from millrace.computations._computation import BatchContext, Computation, Context, TimerBatchContext
from millrace.computations._intervals import IntervalId, KeyInterval, Layout
from millrace.computations._keys import (
    KeyExtractor,
    import_object,
    interval_of,
    intervals_of,
    key_hash,
)
from millrace.computations._records import (
    MAX_PRODUCED_BYTES,
    FiredTimer,
    Record,
    RecordColumns,
    record_columns,
)
from millrace.computations._serde import (
    BYTES,
    JSON,
    BytesSerde,
    JsonSerde,
    ProtobufSerde,
    Serde,
)
from millrace.computations._topology import ComputationSpec, InputSpec, Topology
from millrace.computations.errors import ProduceError, TimerError, TopologyError
from millrace.event_time import MAX_EVENT_TIME_MS, MAX_TIME, MIN_EVENT_TIME_MS, MIN_TIME
from millrace.statestore.types import TimeDomain

__all__ = [
    "BYTES",
    "JSON",
    "MAX_EVENT_TIME_MS",
    "MAX_PRODUCED_BYTES",
    "MAX_TIME",
    "MIN_EVENT_TIME_MS",
    "MIN_TIME",
    "BatchContext",
    "BytesSerde",
    "Computation",
    "ComputationSpec",
    "Context",
    "FiredTimer",
    "InputSpec",
    "IntervalId",
    "JsonSerde",
    "KeyExtractor",
    "KeyInterval",
    "Layout",
    "ProduceError",
    "ProtobufSerde",
    "Record",
    "RecordColumns",
    "Serde",
    "TimeDomain",
    "TimerBatchContext",
    "TimerError",
    "Topology",
    "TopologyError",
    "import_object",
    "interval_of",
    "intervals_of",
    "key_hash",
    "record_columns",
]
