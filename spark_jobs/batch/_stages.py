"""The backfill's plan, without Spark: which computation runs after which, and where
each log record goes first.

A topology is a DAG of computations; a backfill runs one stage per computation
in dependency order. A stage's input is every production addressed to it: the
log records of its source streams (routed as the injector's forwarder routes
them, :class:`SourceRouter`) and the productions of the stages before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from millrace.computations import Topology, intervals_of
from millrace.engine import SINK_PREFIX, Route, routes_of
from millrace.sinks import PARQUET_SCHEMA

INJECTOR = "injector"
"""The producer name the injector's forwarder gives source records."""


def with_intervals(topology: Topology, intervals: int | None) -> Topology:
    """``topology`` with every computation split into ``intervals`` key intervals
    (None: as written). Outputs and ids do not depend on it; parallelism does."""
    if intervals is None:
        return topology
    if intervals < 1:
        raise ValueError(f"intervals must be positive, got {intervals}")
    specs = {
        name: dataclasses.replace(spec, intervals=intervals)
        for name, spec in topology.computations.items()
    }
    return dataclasses.replace(topology, computations=specs)


def stage_order(topology: Topology) -> list[str]:
    """The computations, each after every computation it consumes from."""
    done: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for upstream in sorted(topology.upstream_computations(name)):
            visit(upstream)
        done.append(name)

    for name in sorted(topology.computations):
        visit(name)
    return done


def largest_first(sizes: Mapping[int, int], intervals: int) -> list[int]:
    """The ``intervals`` key intervals (``0 .. intervals - 1``) by how many records
    ``sizes`` gives them (none: 0), most first; ties by interval. Spark starts a stage's
    tasks in partition order, so giving the largest interval the first partition
    schedules the stage largest first: no core is left with a big interval at the end."""
    return sorted(range(intervals), key=lambda i: (-sizes.get(i, 0), i))


PRODUCTIONS_ARROW = pa.schema(
    [("consumer", pa.string()), ("interval", pa.int32()), *PARQUET_SCHEMA, ("seq", pa.int64())]
)
"""A production: where it goes, the delivered record's fields (the sink's columns), and
its place in production order (``OutputRow.seq``)."""


class SourceRouter:
    """Log records of source streams as the productions the injector's forwarder makes
    of them (``engine.source_productions``): one per consuming computation, at the
    interval its key falls in, or one to the stream's sink. An Arrow batch at a time:
    the record columns pass through as they are; only the interval is computed per
    record."""

    def __init__(self, topology: Topology) -> None:
        self._routes = {stream: routes_of(topology, stream) for stream in topology.sources()}

    def route(self, records: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """The productions of ``records`` (columns ``record_id, key, value,
        event_time_ms, stream``) as batches of :data:`PRODUCTIONS_ARROW`."""
        streams = records.column("stream")
        names = pc.unique(streams).to_pylist()
        for stream in names:
            routes = self._routes.get(stream, ())  # not a source of this topology: no routes
            if not routes:
                continue
            part = records if len(names) == 1 else records.filter(pc.equal(streams, stream))
            yield from self._productions(routes, part)

    def _productions(
        self, routes: Iterable[Route], part: pa.RecordBatch
    ) -> Iterator[pa.RecordBatch]:
        size = part.num_rows
        keys: list[bytes] | None = None
        values: list[bytes] | None = None
        for route in routes:
            if route.intervals == 1:
                intervals = pa.repeat(pa.scalar(0, pa.int32()), size)
            else:
                if keys is None or values is None:
                    keys = part.column("key").to_pylist()
                    values = part.column("value").to_pylist()
                numbers = (
                    intervals_of(keys, route.intervals)
                    if route.keyed_as_sent
                    else route.intervals_for(keys, values)
                )
                intervals = pa.array(numbers, pa.int32(), size=size)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.repeat(pa.scalar(route.consumer, pa.string()), size),
                    intervals,
                    part.column("record_id"),
                    part.column("key"),
                    part.column("value"),
                    part.column("event_time_ms").cast(pa.int64()),
                    pa.repeat(pa.scalar(INJECTOR, pa.string()), size),
                    part.column("stream"),
                    pa.repeat(pa.scalar(0, pa.int64()), size),
                ],
                schema=PRODUCTIONS_ARROW,
            )


def sink_stream(consumer: str) -> str | None:
    """The sink stream a production to ``consumer`` belongs to (None: a computation)."""
    return consumer[len(SINK_PREFIX) :] if consumer.startswith(SINK_PREFIX) else None
