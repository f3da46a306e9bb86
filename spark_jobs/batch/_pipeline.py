"""The backfill as Spark stages: the log, routed; one stage per computation; the sinks.

1. The log (``spark.read.format("millrace")``, event-time range pushed down, a short
   log read in pieces so every core reads) becomes productions, routed as the
   injector's forwarder routes them, an Arrow batch at a time; its corrupt entries are
   reported in the same pass. When one computation alone reads the source streams,
   it takes them straight from there; otherwise they are written once
   (``<out>/_stages/source``) for every reader.
2. Per computation, in dependency order: the productions addressed to it,
   shuffled so that each key interval is one Spark partition, the largest first
   (:func:`interval_ordered`), and sorted by event time within each interval (ties: by
   key, then in production order), run through :func:`run_interval` (one
   ``IntervalProcessor`` per interval, a perfect watermark); its productions are
   written beside the others (``<out>/_stages/<computation>``) for the stages
   after it, counted per interval while they are written.
3. Every production addressed to a sink stream is written to
   ``<out>/<stream>/`` as Parquet (the ``ParquetSink`` columns and ``seq``), and
   with ``jsonl`` also to ``<out>/<stream>.jsonl/`` (one part file, lines as
   ``FileSink`` writes them with ``seq``), in production order: each producing
   interval's outputs in the order it produced them (``seq``), as a node's sink
   receives them from that interval.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from millrace.computations import Topology
from millrace.engine import SINK_PREFIX, routes_of
from millrace.sinks import PARQUET_SCHEMA, sink_line
from millrace.spark_jobs.batch._interval_run import IntervalStats, OutputColumns, run_interval
from millrace.spark_jobs.batch._stages import (
    PRODUCTIONS_ARROW,
    SourceRouter,
    largest_first,
    stage_order,
    with_intervals,
)
from millrace.spark_jobs.batch._upcoming import InputColumns, intervals_of
from millrace.wire.v1 import record_pb2

PRODUCTIONS = (
    "consumer string, interval int, record_id binary, key binary, value binary, "
    "event_time_ms long, producer string, stream string, seq long"
)
SINK_COLUMNS = [*PARQUET_SCHEMA.names, "seq"]
"""The columns of a sink stream's output: the Parquet sink's, and its place in
production order (``OutputRow.seq``)."""
STAGE_INPUT_ORDER = ("interval", "event_time_ms", "key", "seq", "record_id")
"""How a stage's input is sorted: each interval's records by event time (the perfect
watermark's order); at one time, one key's records in the order they were produced
(a source's: in log order, which its record ids follow)."""
INTERVALS_PER_PARTITION = 4
"""A backfill's default key intervals per core: each interval is a task, so with
several per core the cores stay busy when some keys hold many records (1,000,000
events with Zipf keys on 2 partitions: 8 intervals ran ~8% faster than 2)."""
_STATS = ("records_in", "productions", "timers_fired", "dead_letters", "duplicates")
_LOG_COLUMNS = (
    "record_id", "key", "value", "event_time_ms", "stream", "segment", "corrupt_position",
    "corrupt_reason",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BackfillOptions:
    """What to backfill and where to put it."""

    topology: Topology
    log: str
    """A log directory or an archive URI (what the ``millrace`` data source loads)."""
    out: str
    """A directory or URI for the outputs (overwritten)."""
    from_ms: int | None = None
    """Only records with event time at or after this (None: from the start)."""
    to_ms: int | None = None
    """Only records with event time before this (None: to the end)."""
    partitions: int | None = None
    """The cores to plan for (None: the session's default parallelism): a short log
    is read in at least this many pieces, and by default each computation gets
    :data:`INTERVALS_PER_PARTITION` key intervals per core."""
    intervals: int | None = None
    """Key intervals per computation (None: :data:`INTERVALS_PER_PARTITION` per
    partition, so every core has intervals to run and skewed keys are balanced;
    outputs and their ids do not depend on it)."""
    jsonl: bool = False
    include_active: bool = False
    """Also read each stream's active segment (a local log directory only): a snapshot,
    for a log whose writer is stopped or for records not sealed yet."""
    batch_size: int = 2000


@dataclass(kw_only=True)
class BackfillSummary:
    """What a backfill did (printed and written as ``<out>/_summary.json`` by the job)."""

    records_read: int = 0
    corrupt: list[dict[str, Any]] = field(default_factory=list)
    stages: dict[str, dict[str, int]] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "records_read": self.records_read,
            "corrupt": self.corrupt,
            "stages": self.stages,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
        }


def run_backfill(spark: Any, options: BackfillOptions) -> BackfillSummary:
    """Run the whole backfill in ``spark`` (see the module docstring)."""
    from pyspark.sql import DataFrame
    from pyspark.sql.functions import col

    from millrace import spark_jobs

    started = time.monotonic()
    parallelism = options.partitions or spark.sparkContext.defaultParallelism
    # Spark's default of 200 shuffle partitions costs a Python task each on small data.
    spark.conf.set("spark.sql.shuffle.partitions", str(parallelism))
    intervals = options.intervals or INTERVALS_PER_PARTITION * parallelism
    topology = with_intervals(options.topology, intervals)
    summary = BackfillSummary()
    sources = list(topology.sources())
    log = spark_jobs.read_log(
        spark, options.log, streams=sources, include_active=options.include_active,
        min_partitions=parallelism,
    )  # fmt: skip
    # Corrupt entries have no event time: a range filter alone would drop their rows.
    in_range = col("corrupt_reason").isNull()
    if options.from_ms is not None:
        in_range = in_range & (col("event_time_ms") >= options.from_ms)
    if options.to_ms is not None:
        in_range = in_range & (col("event_time_ms") < options.to_ms)
    log = log.where(col("corrupt_reason").isNotNull() | in_range)
    stages_dir = f"{options.out.rstrip('/')}/_stages"
    read = spark.sparkContext.accumulator(0)
    corrupt = spark.sparkContext.accumulator([], _Reports())
    routed = log.select(*_LOG_COLUMNS).mapInArrow(_SourceTask(topology, read, corrupt), PRODUCTIONS)
    order = stage_order(topology)
    sizes: dict[str, dict[int, int]] = {}
    written: list[str] = []
    readers = _source_readers(topology)
    direct = readers[0] if len(readers) == 1 and readers[0] in topology.computations else None
    if direct is None:  # several readers: route the log once, for all of them
        sizes = _write(routed, f"{stages_dir}/source", order, intervals)
        written.append(f"{stages_dir}/source")
    for computation in order:
        counters = {name: spark.sparkContext.accumulator(0) for name in _STATS}
        parts = [routed] if computation == direct else []
        parts += [_read(spark, written)] if written else []
        inputs = reduce(DataFrame.unionByName, parts).where(col("consumer") == computation)
        ordered = interval_ordered(inputs, intervals, sizes=sizes.get(computation))
        task = _StageTask(topology, computation, options.batch_size, counters)
        produced = ordered.mapInArrow(task, PRODUCTIONS)
        made = _write(produced, f"{stages_dir}/{computation}", order, intervals)
        for consumer, counts in made.items():
            into = sizes.setdefault(consumer, {})
            for interval, count in counts.items():
                into[interval] = into.get(interval, 0) + count
        written.append(f"{stages_dir}/{computation}")
        summary.stages[computation] = {name: counter.value for name, counter in counters.items()}
    summary.outputs = _write_sinks(spark, topology, _read(spark, written), options)
    summary.records_read = read.value
    summary.corrupt = sorted(
        {tuple(sorted(report.items())): report for report in corrupt.value}.values(),
        key=lambda r: (r["stream"], r["segment"], r["corrupt_position"]),
    )
    summary.seconds = time.monotonic() - started
    return summary


def _write_sinks(
    spark: Any, topology: Topology, every: Any, options: BackfillOptions
) -> dict[str, int]:
    """Each sink stream's productions written in production order; how many each got."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as fn

    outputs = {}
    for stream in topology.sinks():
        path = f"{options.out.rstrip('/')}/{stream}"
        order = ("producer", "seq", "record_id")
        output = every.where(fn.col("consumer") == SINK_PREFIX + stream).select(*SINK_COLUMNS)
        counted = Observation(f"sink_{stream}")
        rows = fn.count(fn.lit(1)).alias("rows")
        output.orderBy(*order).observe(counted, rows).write.mode("overwrite").parquet(path)
        outputs[stream] = int(counted.get["rows"])
        if options.jsonl:
            lines = spark.read.parquet(path).orderBy(*order).coalesce(1).rdd.map(_jsonl)
            lines.saveAsTextFile(f"{path}.jsonl")
    return outputs


def interval_ordered(
    productions: Any, intervals: int, *, sizes: Mapping[int, int] | None = None
) -> Any:
    """``productions`` (of ``intervals`` key intervals) in one Spark partition per
    interval, the largest first when ``sizes`` (records per interval) are known
    (:func:`largest_first`), each interval's records in :data:`STAGE_INPUT_ORDER`.
    Spark runs the partitions as tasks in order, each core taking the next when it is
    done, so several intervals per core balance the stage.

    Spark's partitioners cannot be told "this row goes to partition p": hashing a
    few small interval numbers often puts two in one task. So each interval gets a
    stand-in key whose hash Spark itself maps to the partition chosen for it
    (``hash`` is the Murmur3 that hash partitioning uses)."""
    from pyspark.sql import functions as fn

    stand_in = _stand_ins(productions.sparkSession, intervals)
    if len(stand_in) < intervals:  # a hash that skips a partition: one partition may hold two
        return productions.repartition(intervals, "interval").sortWithinPartitions(
            *STAGE_INPUT_ORDER
        )
    placed = largest_first(sizes or {}, intervals)
    pairs = [fn.lit(value) for p, i in enumerate(placed) for value in (i, stand_in[p])]
    part = fn.element_at(fn.create_map(*pairs), fn.col("interval")).cast("long")
    return productions.repartition(intervals, part).sortWithinPartitions(*STAGE_INPUT_ORDER)


_STAND_INS: dict[int, dict[int, int]] = {}


def _stand_ins(spark: Any, partitions: int) -> dict[int, int]:
    """Per partition, a number whose Spark hash lands in it (found once per process)."""
    from pyspark.sql import functions as fn

    if partitions not in _STAND_INS:
        wanted = fn.pmod(fn.hash(fn.col("id")), fn.lit(partitions))
        found = spark.range(0, 64 * partitions + 1024).select("id", wanted.alias("part"))
        stand_in: dict[int, int] = {}
        for row in found.collect():
            stand_in.setdefault(row.part, row.id)
        _STAND_INS[partitions] = stand_in
    return _STAND_INS[partitions]


def _write(
    frame: Any, path: str, consumers: list[str], intervals: int
) -> dict[str, dict[int, int]]:
    """Write ``frame`` as Parquet to ``path``; returns, per consumer of ``consumers``,
    how many of its rows went to each of its ``intervals``, counted while writing (a
    Spark observation: no second pass over the rows)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as fn

    cells = [(c, i) for c in consumers for i in range(intervals)]
    if not cells:
        frame.write.mode("overwrite").parquet(path)
        return {}
    observation = Observation("interval_sizes")
    counts = [
        fn.sum(((fn.col("consumer") == c) & (fn.col("interval") == i)).cast("long")).alias(f"n{n}")
        for n, (c, i) in enumerate(cells)
    ]
    frame.observe(observation, *counts).write.mode("overwrite").parquet(path)
    got = observation.get
    sizes: dict[str, dict[int, int]] = {}
    for n, (c, i) in enumerate(cells):
        sizes.setdefault(c, {})[i] = int(got.get(f"n{n}") or 0)
    return sizes


def _batched(chunks: Iterable[OutputColumns], size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Productions as Arrow batches of :data:`PRODUCTIONS_ARROW` (about ``size`` rows)."""
    pending: list[OutputColumns] = []
    rows = 0
    for chunk in chunks:
        pending.append(chunk)
        rows += len(chunk)
        if rows >= size:
            yield _batch(pending)
            pending, rows = [], 0
    if pending:
        yield _batch(pending)


def _batch(chunks: list[OutputColumns]) -> pa.RecordBatch:
    fields = (
        "consumers", "intervals", "record_ids", "keys", "values", "times", "producers",
        "streams", "seqs",
    )  # fmt: skip
    return pa.RecordBatch.from_arrays(
        [
            pa.array([x for chunk in chunks for x in getattr(chunk, name)], type=f.type)
            for name, f in zip(fields, PRODUCTIONS_ARROW, strict=True)
        ],
        schema=PRODUCTIONS_ARROW,
    )


def _read(spark: Any, paths: list[str]) -> Any:
    return spark.read.schema(PRODUCTIONS).parquet(*paths)


def _jsonl(row: Any) -> str:
    record = record_pb2.Record(
        record_id=row.record_id, key=row.key, value=row.value,
        event_time_ms=row.event_time_ms, producer=row.producer,
    )  # fmt: skip
    return sink_line(record, seq=row.seq).decode().rstrip("\n")


class _SourceTask:
    """What one Spark task reading the log runs: its log rows as productions; its
    corrupt entries' reports go to an accumulator."""

    def __init__(self, topology: Topology, read: Any, corrupt: Any) -> None:
        self._router = SourceRouter(topology)
        self._read = read
        self._corrupt = corrupt

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            sound = pc.is_null(batch.column("corrupt_reason"))
            records = batch.filter(sound)
            self._read.add(records.num_rows)
            yield from self._router.route(records)
            if records.num_rows < batch.num_rows:
                self._corrupt.add(_corrupt_reports(batch.filter(pc.invert(sound))))


def _corrupt_reports(corrupt: pa.RecordBatch) -> list[dict[str, Any]]:
    return [
        {"stream": row["stream"], "segment": row["segment"],
         "corrupt_position": row["corrupt_position"], "corrupt_reason": row["corrupt_reason"]}
        for row in corrupt.select(
            ["stream", "segment", "corrupt_position", "corrupt_reason"]
        ).to_pylist()
    ]  # fmt: skip


class _Reports:
    """Spark's ``AccumulatorParam`` for reports (lists, concatenated); duck-typed, so
    that this module imports without pyspark."""

    def zero(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return []

    def addInPlace(  # noqa: N802 (Spark's name)
        self, value1: list[dict[str, Any]], value2: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        value1.extend(value2)
        return value1


def _source_readers(topology: Topology) -> list[str]:
    """What reads the source streams: the computations consuming them, and the sinks of
    source streams that no computation consumes."""
    readers: list[str] = []
    for stream in topology.sources():
        for route in routes_of(topology, stream):
            if route.consumer not in readers:
                readers.append(route.consumer)
    return readers


class _StageTask:
    """What one Spark task of a stage runs: each interval of its partition in turn."""

    def __init__(
        self, topology: Topology, computation: str, batch_size: int, counters: dict[str, Any]
    ) -> None:
        self._topology = topology
        self._computation = computation
        self._batch_size = batch_size
        self._counters = counters

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _batched(self._outputs(batches))

    def _outputs(self, batches: Iterable[pa.RecordBatch]) -> Iterator[OutputColumns]:
        for interval, inputs in intervals_of(batches):
            yield from self._interval(interval, inputs)

    def _interval(self, interval: int, inputs: list[InputColumns]) -> Iterator[OutputColumns]:
        stats = IntervalStats()
        yield from run_interval(
            self._topology, self._computation, interval, inputs, stats,
            batch_size=self._batch_size,
        )  # fmt: skip
        for name in _STATS:
            self._counters[name].add(getattr(stats, name))
