"""Streaming SQL on the exactly-once engine: Flink SQL's statements planned onto
``dataflow`` computations (``docs/sql.md``).

    pipeline = millrace.sql(open("query.sql").read())   # or compile_sql(...)
    pipeline.write_topology("topology.toml")             # deploys like any topology
    print(pipeline.explain())

``CREATE TABLE`` declares a stream of JSON rows (``WITH ('stream' = ...)``, a
``WATERMARK FOR`` column as its event time), ``CREATE VIEW`` a named query, and each
``INSERT INTO sink SELECT ...`` becomes the computations writing the query's rows to
the sink's stream. What cannot be planned is a :class:`SqlError` naming the clause.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from millrace.streamsql._errors import SqlError
from millrace.streamsql._explain import explain
from millrace.streamsql._expressions import TOO_DEEP
from millrace.streamsql._functions import SqlRuntimeError
from millrace.streamsql._joined import SqlJoin, SqlTemporalJoin
from millrace.streamsql._over_aggregate import SqlOverAggregate
from millrace.streamsql._planner import Planner, parse_statements
from millrace.streamsql._ranking import SqlRanking
from millrace.streamsql._rows import no_key
from millrace.streamsql._runtime import SqlSelect, SqlWindowAggregate

__all__ = [
    "SqlError",
    "SqlJoin",
    "SqlOverAggregate",
    "SqlPipeline",
    "SqlRanking",
    "SqlRuntimeError",
    "SqlSelect",
    "SqlTemporalJoin",
    "SqlWindowAggregate",
    "compile_sql",
    "no_key",
]


@dataclass(frozen=True)
class SqlPipeline:
    """The computations a SQL text plans to, as a topology."""

    topology: dict[str, Any]
    """What a topology file holds (``Topology.from_dict`` takes it)."""
    sources: tuple[str, ...]
    """The streams the queries read that no computation writes (to inject)."""
    sinks: tuple[str, ...]
    """The streams the queries write (``INSERT INTO``)."""
    watermark_delay_ms: int | None
    """The largest ``WATERMARK ... - INTERVAL`` of the sources read: the injector's
    ``out_of_orderness_ms`` that gives the watermarks the SQL asks for."""
    explained: tuple[str, ...] = ()
    """The sinks of its ``EXPLAIN INSERT`` statements."""

    def explain(self) -> str:
        """The plan: each computation, what it reads and writes, its state and timers."""
        return explain(self.topology, list(self.sinks))

    def toml(self) -> str:
        """The topology as the text of a topology file."""
        return tomli_w.dumps(self.topology)

    def deployment(self, *, topology: str, first_port: int = 7400) -> dict[str, Any]:
        """A deployment file's contents running the plan on this machine: an injector
        (its ``out_of_orderness_ms`` the SQL's largest watermark delay), one node per
        computation with all its intervals, a JSON-lines file sink per sink stream
        (``out/<stream>.jsonl``), on consecutive ports from ``first_port``."""
        ports = iter(range(first_port, first_port + 1_000))
        injector: dict[str, Any] = {"address": f"127.0.0.1:{next(ports)}"}
        if self.watermark_delay_ms is not None:
            injector["out_of_orderness_ms"] = self.watermark_delay_ms
        nodes = {
            name.replace("_", "-"): {
                "computation": name,
                "intervals": list(range(spec["intervals"])),
                "address": f"127.0.0.1:{next(ports)}",
            }
            for name, spec in self.topology["computations"].items()
        }
        sinks = {
            stream: {"address": f"127.0.0.1:{next(ports)}", "path": f"out/{stream}.jsonl"}
            for stream in self.sinks
        }
        return {"topology": topology, "injector": injector, "nodes": nodes, "sinks": sinks}

    def write_topology(self, path: str | Path) -> None:
        """Write the topology file ``path``."""
        Path(path).write_text(self.toml())


def compile_sql(text: str, *, intervals: int = 1) -> SqlPipeline:
    """Plan the statements of ``text`` (``;``-separated); every computation gets
    ``intervals`` key intervals. Raises :class:`SqlError` for what cannot be planned."""
    if intervals < 1:
        raise SqlError("intervals must be at least 1")
    planner = Planner(intervals=intervals)
    try:
        for statement in parse_statements(text):
            planner.statement(statement)
    except RecursionError:
        raise SqlError(TOO_DEEP) from None
    if not planner.sinks:
        raise SqlError("no INSERT INTO statement: nothing to run")
    topology = planner.stages.topology()
    written = {o for spec in topology["computations"].values() for o in spec["outputs"]}
    sources = tuple(s for s in topology["streams"] if s not in written)
    delays = [
        t.watermark_delay_ms
        for t in planner.tables.values()
        if t.stream in sources and t.watermark_delay_ms is not None
    ]
    return SqlPipeline(
        topology=topology,
        sources=sources,
        sinks=tuple(dict.fromkeys(planner.sinks)),
        watermark_delay_ms=max(delays) if delays else None,
        explained=tuple(planner.explained),
    )
