"""The backfill's plan, without Spark: which computation runs after which, and where
each log record goes first.

A topology is a DAG of computations; a backfill runs one stage per computation
in dependency order. A stage's input is every production addressed to it: the
log records of its source streams (routed as the injector's forwarder routes
them) and the productions of the stages before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator

from computations import Topology
from engine import SINK_PREFIX, routes_of
from spark_jobs.batch._interval_run import OutputRow

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


def route_log_rows(
    topology: Topology, rows: Iterable[tuple[bytes, bytes, bytes, int, str]]
) -> Iterator[OutputRow]:
    """Each log record ``(record_id, key, value, event_time_ms, stream)`` of a source
    stream as the productions the forwarder makes of it: one per consuming
    computation (at the interval its key falls in), or its sink."""
    routes = {stream: routes_of(topology, stream) for stream in topology.sources()}
    for record_id, key, value, event_time_ms, stream in rows:
        # As engine.source_productions routes a record, without building one.
        for route in routes.get(stream, ()):  # not a source of this topology: no routes
            yield OutputRow(
                route.consumer, route.interval_for(key, value), record_id, key, value,
                event_time_ms, INJECTOR, stream,
            )  # fmt: skip


def sink_stream(consumer: str) -> str | None:
    """The sink stream a production to ``consumer`` belongs to (None: a computation)."""
    return consumer[len(SINK_PREFIX) :] if consumer.startswith(SINK_PREFIX) else None
