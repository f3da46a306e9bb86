"""State bootstrap: a computation's interval stores built from the log, for its nodes.

A new computation (or one fixed after a bug) is backfilled over the log below
offset ``N`` of each of its source streams, through the same
:func:`run_interval` as a backfill, with two differences: the perfect
watermark stops where the online one would have been once ``N`` was ingested
(``min over streams (max event time below N) - out_of_orderness_ms``), so
windows still open then stay open, their state and timers in the store; and
what the computation produced stays in each store's outbox, which the node
sends when it starts (receivers drop duplicates by id). Each interval's store
is written where its node keeps it (``<nodes dir>/<computation>/<interval>``).
The injector is then told that the computation has acknowledged everything
below ``N`` (its ``forwarded.json``): online processing resumes at ``N``, with
no gap and nothing counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from millrace.computations import MIN_EVENT_TIME_MS, Topology
from millrace.injector.forwarder import set_acknowledged
from millrace.spark_jobs.batch._interval_run import IntervalStats, run_interval
from millrace.spark_jobs.batch._pipeline import PRODUCTIONS, interval_ordered
from millrace.spark_jobs.batch._stages import SourceRouter
from millrace.spark_jobs.batch._upcoming import InputColumns, intervals_of

_STATS = ("records_in", "productions", "timers_fired", "dead_letters")


class BootstrapError(Exception):
    """A bootstrap that cannot be done as asked (the message says why)."""


@dataclass(frozen=True, kw_only=True)
class BootstrapOptions:
    """What to bootstrap, from where, and up to which offsets."""

    topology: Topology
    computation: str
    log: str
    until: Mapping[str, int]
    """Per source stream of the computation: the first offset left to the nodes."""
    nodes_dir: str
    """The nodes' ``--data-dir``: stores go to ``<nodes_dir>/<computation>/<interval>``."""
    out_of_orderness_ms: int
    include_active: bool = True
    batch_size: int = 2000


@dataclass(kw_only=True)
class BootstrapSummary:
    """What a bootstrap did."""

    records: int = 0
    watermark_ms: int = MIN_EVENT_TIME_MS
    intervals: int = 0
    stats: dict[str, int] = field(default_factory=dict)


def check_bootstrap(options: BootstrapOptions) -> list[str]:
    """The computation's source streams; :class:`BootstrapError` if it reads another
    computation's output, an offset is missing, or a store is already there."""
    topology, name = options.topology, options.computation
    if name not in topology.computations:
        raise BootstrapError(f"no computation {name!r} in the topology")
    streams = list(topology.computations[name].input_streams())
    not_sources = [s for s in streams if s not in topology.sources()]
    if not_sources:
        raise BootstrapError(
            f"{name!r} reads {not_sources}, which computations produce: only computations "
            "that read source streams can be bootstrapped from the log"
        )
    missing = [s for s in streams if s not in options.until]
    if missing:
        raise BootstrapError(f"give the offset to stop at for {missing}")
    for interval in range(topology.computations[name].intervals):
        store = Path(options.nodes_dir) / name / str(interval)
        if store.exists():
            raise BootstrapError(f"{store} exists: a bootstrap writes new stores only")
    return streams


def run_bootstrap(spark: Any, options: BootstrapOptions) -> BootstrapSummary:
    """Build the stores (see the module docstring); the forwarded offsets are written
    by :func:`resume_forwarding` once this returned."""
    from pyspark.sql import functions as fn

    from millrace import spark_jobs

    streams = check_bootstrap(options)
    topology, name = options.topology, options.computation
    log = spark_jobs.read_log(
        spark, options.log, streams=streams, include_active=options.include_active,
        min_partitions=spark.sparkContext.defaultParallelism,
    ).where(fn.col("corrupt_reason").isNull())  # fmt: skip
    below = None
    for stream in streams:
        cond = (fn.col("stream") == stream) & (fn.col("offset") < options.until[stream])
        below = cond if below is None else below | cond
    records = log.where(below).select("record_id", "key", "value", "event_time_ms", "stream")
    records = records.cache()
    newest = dict(records.groupBy("stream").agg(fn.max("event_time_ms")).collect())
    summary = BootstrapSummary(records=records.count())
    if all(stream in newest for stream in streams):
        summary.watermark_ms = min(newest[s] for s in streams) - options.out_of_orderness_ms
    intervals = topology.computations[name].intervals
    summary.intervals = intervals
    spark.conf.set("spark.sql.shuffle.partitions", str(intervals))
    router = SourceRouter(topology)
    routed = records.mapInArrow(
        lambda batches: (out for batch in batches for out in router.route(batch)), PRODUCTIONS
    ).where(fn.col("consumer") == name)
    ordered = interval_ordered(routed, intervals)
    counters = {stat: spark.sparkContext.accumulator(0) for stat in _STATS}
    task = _StoreTask(topology, name, options, summary.watermark_ms, counters)
    ordered.mapInArrow(task, PRODUCTIONS).count()
    records.unpersist()
    summary.stats = {stat: counter.value for stat, counter in counters.items()}
    return summary


def resume_forwarding(log_dir: Path, computation: str, until: Mapping[str, int]) -> None:
    """Record in each stream's forwarding state that ``computation`` acknowledged every
    offset below ``until[stream]`` (the injector must be stopped)."""
    for stream, offset in until.items():
        set_acknowledged(log_dir / stream, stream, computation, offset)


class _StoreTask:
    """One Spark task of a bootstrap: each interval of its partition into its store."""

    def __init__(
        self,
        topology: Topology,
        computation: str,
        options: BootstrapOptions,
        watermark_ms: int,
        counters: dict[str, Any],
    ) -> None:
        self._topology = topology
        self._computation = computation
        self._nodes_dir = options.nodes_dir
        self._batch_size = options.batch_size
        self._watermark_ms = watermark_ms
        self._counters = counters

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for interval, inputs in intervals_of(batches):
            self._store(interval, inputs)
        return iter(())

    def _store(self, interval: int, inputs: list[InputColumns]) -> None:
        path = Path(self._nodes_dir) / self._computation / str(interval)
        path.parent.mkdir(parents=True, exist_ok=True)
        stats = IntervalStats()
        for _ in run_interval(
            self._topology, self._computation, interval, inputs, stats,
            batch_size=self._batch_size, keep_store=path, final_watermark=self._watermark_ms,
        ):  # fmt: skip
            pass  # productions stay in the store's outbox
        for stat in _STATS:
            self._counters[stat].add(getattr(stats, stat))
