"""Topologies and logs the backfill tests run, and an in-process reference run."""

from __future__ import annotations

import json
import random
import tomllib
from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from millrace.computations import (
    JSON,
    MAX_EVENT_TIME_MS,
    Computation,
    Context,
    FiredTimer,
    Record,
    Topology,
)
from millrace.computations.testing import TestHarness
from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from millrace.spark_jobs.batch import (
    InputColumns,
    InputRow,
    IntervalStats,
    OutputRow,
    SourceRouter,
    run_interval,
    stage_order,
)

T0 = 1_700_000_000_000

TWO_STAGES = """
[streams.events]
[streams.counts]
[streams.totals]

[computations.count]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 2
inputs = { events = "key" }
outputs = ["counts"]
params = { window = "tumbling:10000", aggregate = "count+sum", output = "counts" }

[computations.total]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 3
inputs = { counts = "key" }
outputs = ["totals"]
params = { window = "tumbling:60000", aggregate = "count", output = "totals", input_panes = true }
"""


JOIN_AND_SESSIONS = """
[streams.orders]
[streams.shipments]
[streams.joined]
[streams.late]
[streams.sessions]

[computations.join]
handler = "millrace.dataflow:IntervalJoin"
intervals = 2
inputs = { orders = "key", shipments = "json:order" }
outputs = ["joined", "late"]
params = { left = "orders", right = "shipments", lower_ms = 0, upper_ms = 3000, how = "full", \
allowed_lateness_ms = 0, output = "joined", late_output = "late" }

[computations.sessions]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 3
inputs = { orders = "key" }
outputs = ["sessions"]
params = { window = "session:1500", aggregate = "count", output = "sessions" }
"""


def join_and_sessions() -> Topology:
    return Topology.from_dict(tomllib.loads(JOIN_AND_SESSIONS))


def write_orders(log_dir: Path, count: int, *, seed: int = 9) -> None:
    """Orders (keyed o<n>) and shipments (value {"order": "o<n>"}) with disorder."""
    rng = random.Random(seed)
    logs = {s: StreamLog.open(log_dir / s, s, config=LogConfig(segment_bytes=8_000))
            for s in ("orders", "shipments")}  # fmt: skip
    try:
        for n in range(count):
            order = f"o{rng.randrange(count // 3)}"
            ts = T0 + n * 200 - rng.randrange(1000)
            logs["orders"].append([AppendRequest(records=[(order.encode(), b"{}", ts)])])
            if rng.random() < 0.7:
                body = json.dumps({"order": order, "parcel": f"p{n}"}).encode()
                shipped = ts + rng.randrange(-500, 4000)
                logs["shipments"].append(
                    [AppendRequest(records=[(f"p{n}".encode(), body, shipped)])]
                )
    finally:
        for log in logs.values():
            log.close()


UPDATES = """
[streams.events]
[streams.sums]
[streams.updates]
[streams.finals]

[computations.running]
handler = "tests.spark_backfill._topologies:RunningSum"
intervals = 3
inputs = { events = "key" }
outputs = ["sums", "updates"]

[computations.latest]
handler = "tests.spark_backfill._topologies:LatestValue"
intervals = 2
inputs = { updates = "key" }
outputs = ["finals"]
"""


class RunningSum(Computation):
    """An updating result: per key, the running sum of the values, produced after each
    record (to a sink and to ``latest``) at the record's time rounded down to 10 s, so a
    key's updates share event times and only production order tells the latest."""

    def process_record(self, ctx: Context, record: Record) -> None:
        total = (ctx.get_state("sum", JSON) or 0) + int(record.value)
        ctx.put_state("sum", total, JSON)
        at = record.event_time_ms // 10_000 * 10_000
        for stream in ("sums", "updates"):
            ctx.produce(stream, ctx.key, str(total).encode(), at)


class LatestValue(Computation):
    """Keeps its key's latest value as received; produces it at the end of input."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.put_state("latest", record.value.decode(), JSON)
        ctx.set_timer("end", MAX_EVENT_TIME_MS)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("finals", ctx.key, str(ctx.get_state("latest", JSON)).encode(), timer.time_ms)


def updates() -> Topology:
    return Topology.from_dict(tomllib.loads(UPDATES))


def two_stages() -> Topology:
    return Topology.from_dict(tomllib.loads(TWO_STAGES))


def write_log(log_dir: Path, events: int, *, seed: int = 5, segment_bytes: int = 20_000) -> None:
    """``events`` records of 40 keys, ~50 ms apart with up to 3 s of disorder, in requests
    of 1..30 records; small segments."""
    rng = random.Random(seed)
    log = StreamLog.open(
        log_dir / "events", "events", config=LogConfig(segment_bytes=segment_bytes)
    )
    sent = 0
    while sent < events:
        size = min(rng.randint(1, 30), events - sent)
        records = [
            (
                f"u{rng.randrange(40)}".encode(),
                str(rng.randint(1, 100)).encode(),
                T0 + (sent + i) * 50 - rng.randrange(3000),
            )
            for i in range(size)
        ]
        log.append([AppendRequest(records=records)])
        sent += size
    log.close()


def log_records(
    log_dir: Path, stream: str = "events"
) -> list[tuple[bytes, bytes, bytes, int, str]]:
    log = StreamLog.open(log_dir / stream, stream, read_only=True)
    try:
        return [(r.record_id, r.key, r.value, r.event_time_ms, stream) for r in log.read(0, 10**9)]
    finally:
        log.close()


def harness_outputs(topology: Topology, records: list[tuple[bytes, bytes, bytes, int, str]],
                    *, chunk: int = 50) -> dict[str, dict[bytes, Record]]:  # fmt: skip
    """The online reference: every record fed in log order with its log id, the source
    watermark following the max event time minus 5 s (no record is late), then +inf."""
    harness = TestHarness(topology)
    high = None
    for at in range(0, len(records), chunk):
        for record_id, key, value, ts, stream in records[at : at + chunk]:
            harness.feed(stream, key, value, ts, record_id=record_id)
            high = ts if high is None else max(high, ts)
        harness.run()
        assert high is not None
        harness.advance_watermark(high - 5_000)
    harness.advance_watermark(2**62)
    return {s: {r.record_id: r for r in harness.outputs(s)} for s in topology.sinks()}


LOG_ROW = pa.schema([("record_id", pa.binary()), ("key", pa.binary()), ("value", pa.binary()),
                     ("event_time_ms", pa.int64()), ("stream", pa.string())])  # fmt: skip


def routed(
    topology: Topology, records: list[tuple[bytes, bytes, bytes, int, str]], *, batch: int = 97
) -> list[OutputRow]:
    """The backfill's source stage (:class:`SourceRouter`) over ``records``, as rows."""
    router = SourceRouter(topology)
    rows: list[OutputRow] = []
    for at in range(0, len(records), batch):
        columns = list(zip(*records[at : at + batch], strict=True))
        arrays = [pa.array(c, f.type) for c, f in zip(columns, LOG_ROW, strict=True)]
        for out in router.route(pa.RecordBatch.from_arrays(arrays, schema=LOG_ROW)):
            rows.extend(OutputRow(*row) for row in zip(*out.to_pydict().values(), strict=True))
    return rows


def local_backfill(
    topology: Topology,
    records: list[tuple[bytes, bytes, bytes, int, str]],
    *,
    batch_size: int = 100,
) -> dict[str, dict[bytes, tuple[bytes, bytes, int]]]:
    """The backfill's stages without Spark: route, then each computation's intervals."""
    produced = routed(topology, records)
    for computation in stage_order(topology):
        by_interval: dict[int, list[OutputRow]] = defaultdict(list)
        for row in produced:
            if row.consumer == computation:
                by_interval[row.interval].append(row)
        for interval, rows in sorted(by_interval.items()):
            rows.sort(key=lambda r: (r.event_time_ms, r.key, r.seq, r.record_id))  # the stages'
            inputs = [
                InputRow(r.record_id, r.key, r.value, r.event_time_ms, r.producer, r.stream)
                for r in rows
            ]
            for chunk in run_interval(topology, computation, interval,
                                      [InputColumns.of_rows(inputs)], IntervalStats(),
                                      batch_size=batch_size):  # fmt: skip
                produced.extend(chunk.rows())
    outputs: dict[str, dict[bytes, tuple[bytes, bytes, int]]] = {s: {} for s in topology.sinks()}
    for row in produced:
        if row.consumer.startswith("sink:"):
            outputs[row.consumer[5:]][row.record_id] = (row.key, row.value, row.event_time_ms)
    return outputs
