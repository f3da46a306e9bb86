"""The computations of a plan, as a topology file holds them, and what writes one.

Every stage is a library computation named in the topology like any other (``inputs``
with key extractors, ``outputs``, ``params``), so a plan deploys, scales (``intervals``)
and backfills as hand-written topologies do.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import sql_text
from millrace.streamsql._relations import Relation

SELECT_HANDLER = "millrace.streamsql:SqlSelect"
WINDOW_HANDLER = "millrace.streamsql:SqlWindowAggregate"
NO_KEY = "py:millrace.streamsql:no_key"


class Stages:
    """The computations and streams a plan has so far."""

    def __init__(self, *, intervals: int = 1) -> None:
        self.intervals = intervals
        self.computations: dict[str, dict[str, Any]] = {}
        self.streams: list[str] = []

    def name(self, base: str) -> str:
        """A computation (and stream) name not yet taken: ``base``, ``base_2``, ..."""
        taken = set(self.computations) | set(self.streams)
        if base not in taken:
            return base
        n = 2
        while f"{base}_{n}" in taken:
            n += 1
        return f"{base}_{n}"

    def stream(self, name: str) -> None:
        """Declare a stream (once)."""
        if name not in self.streams:
            self.streams.append(name)

    def add(
        self, name: str, handler: str, inputs: dict[str, str], output: str, params: dict[str, Any]
    ) -> None:
        """One computation reading ``inputs`` (stream -> key extractor), writing ``output``."""
        params = {**params, "output": output}
        _check(name, handler, params)
        for stream in (*inputs, output):
            self.stream(stream)
        self.computations[name] = {
            "handler": handler,
            "intervals": self.intervals,
            "inputs": inputs,
            "outputs": [output],
            "params": params,
        }

    def write(
        self, relation: Relation, output: str, name: str, *, names: list[str] | None = None
    ) -> Relation:
        """Write the relation's rows to ``output`` (its columns renamed to ``names``),
        by the window aggregation it is pending on or by a :class:`SqlSelect` of its
        stream; returns the relation over the written stream."""
        names = names if names is not None else list(relation.columns)
        columns = [
            [new, sql_text(node)]
            for new, node in zip(names, relation.columns.values(), strict=True)
        ]
        where = sql_text(relation.where) if relation.where is not None else None
        if relation.pending is not None:
            spec = relation.pending
            params = {**spec["params"], "columns": columns}
            if where is not None:
                params["having"] = where
            self.add(name, WINDOW_HANDLER, spec["inputs"], output, params)
        else:
            params = {"columns": columns}
            if where is not None:
                params["where"] = where
            if relation.time_column is not None:
                params["time_column"] = relation.time_column
            self.add(name, SELECT_HANDLER, {relation.stream: "key"}, output, params)
        renamed = dict(zip(relation.columns, names, strict=True))
        time_name = relation.time_name()
        return Relation(
            stream=output,
            columns={new: exp.column(new, quoted=True) for new in names},
            kinds={renamed[old]: relation.column_kind(old) for old in relation.columns},
            not_null=frozenset(
                renamed[old]
                for old, node in relation.columns.items()
                if isinstance(node, exp.Column) and node.name in relation.not_null
            ),
            time_column=renamed[time_name] if time_name is not None else None,
        )

    def materialized(self, relation: Relation, base: str) -> Relation:
        """The relation with nothing pending (its rows written to a stream of their own
        when they are not just its stream's records)."""
        if relation.pending is None and relation.where is None and _identity(relation):
            return relation
        name = self.name(base)
        return self.write(relation, name, name).named(relation.alias)

    def topology(self) -> dict[str, Any]:
        """The plan as a topology file's contents."""
        return {
            "streams": {s: {} for s in self.streams},
            "computations": self.computations,
        }


def _check(name: str, handler: str, params: dict[str, Any]) -> None:
    """Set the computation up as a node will (its expressions compiled), so that SQL a
    node could not run is refused now, naming the expression."""
    from millrace.streamsql import _runtime  # the handlers (they import the dataflow library)

    computation = getattr(_runtime, handler.rpartition(":")[2])()
    try:
        computation.setup(params)
    except SqlError:
        raise
    except ValueError as exc:
        raise SqlError(f"{name}: {exc}") from None


def _identity(relation: Relation) -> bool:
    return all(
        isinstance(node, exp.Column) and node.name == name
        for name, node in relation.columns.items()
    )
