"""The computations of a plan, as a topology file holds them, and what writes one.

Every stage is a library computation named in the topology like any other (``inputs``
with key extractors, ``outputs``, ``params``), so a plan deploys, scales (``intervals``)
and backfills as hand-written topologies do.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from millrace.computations import import_object
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import parse_expression, sql_text
from millrace.streamsql._relations import Relation

SELECT_HANDLER = "millrace.streamsql:SqlSelect"
WINDOW_HANDLER = "millrace.streamsql:SqlWindowAggregate"
JOIN_HANDLER = "millrace.streamsql:SqlJoin"
TEMPORAL_HANDLER = "millrace.streamsql:SqlTemporalJoin"
OVER_HANDLER = "millrace.streamsql:SqlOverAggregate"
RANKING_HANDLER = "millrace.streamsql:SqlRanking"
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
        self,
        relation: Relation,
        output: str,
        name: str,
        *,
        names: list[str] | None = None,
        key: list[exp.Expr] | None = None,
        key_format: str = "array",
    ) -> Relation:
        """Write the relation's rows to ``output`` (its columns renamed to ``names``,
        keyed by ``key``: expressions over its columns; none: as they come) by the
        aggregation or join it is pending on, or by a :class:`SqlSelect` of its stream;
        returns the relation over the written stream."""
        names = names if names is not None else list(relation.columns)
        renamed = dict(zip(relation.columns, names, strict=True))
        columns = [[renamed[n], sql_text(node)] for n, node in relation.columns.items()]
        where = relation.where
        params: dict[str, Any]
        if relation.pending is not None:
            spec = relation.pending
            params = {**spec["params"], "columns": columns}
            if where is not None:
                params.update(_pending_filter(spec, where))
            if key:
                params["output_key"] = [sql_text(_renamed(k, renamed)) for k in key]
                params["output_key_format"] = key_format
            self.add(name, spec["handler"], spec["inputs"], output, params)
        else:
            params = {"columns": columns}
            if where is not None:
                params["where"] = sql_text(where)
            if relation.time_column is not None:
                params["time_column"] = relation.time_column
            if relation.updating:
                params["changelog"] = True
            if key:
                params["key"] = [sql_text(relation.resolve(k)) for k in key]
                params["key_format"] = key_format
            self.add(name, SELECT_HANDLER, {relation.stream: "key"}, output, params)
        offsets = {
            renamed[n]: offset
            for n, node in relation.columns.items()
            if (offset := relation.time_offset(node)) is not None
        }
        return Relation(
            stream=output,
            columns={new: exp.column(new, quoted=True) for new in names},
            kinds={renamed[old]: relation.column_kind(old) for old in relation.columns},
            not_null=frozenset(
                renamed[old]
                for old, node in relation.columns.items()
                if isinstance(node, exp.Column) and node.name in relation.not_null
            ),
            time_column=next((n for n, offset in offsets.items() if offset == 0), None),
            time_fields=offsets,
            updating=relation.updating,
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


def _renamed(node: exp.Expr, renamed: dict[str, str]) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.name in renamed:
            return exp.column(renamed[n.name], quoted=True)
        return n

    return node.copy().transform(swap)


def _pending_filter(spec: dict[str, Any], where: exp.Expr) -> dict[str, str]:
    """A filter of a pending computation's rows: a window aggregation's ``having``, an
    inner join's ``condition`` (ANDed with its own)."""
    if spec["handler"] == WINDOW_HANDLER:
        return {"having": sql_text(where)}
    if spec["handler"] == OVER_HANDLER:
        return {"where": sql_text(where)}
    if spec["handler"] == TEMPORAL_HANDLER and spec["params"].get("how") != "inner":
        raise SqlError("a WHERE over a LEFT temporal join's rows is not supported yet")
    if spec["params"].get("how", "inner") != "inner":
        raise SqlError("a WHERE over an outer join's rows is not supported yet (put the "
                       "condition in ON, or filter in an outer query over its sink)")  # fmt: skip
    condition = spec["params"].get("condition")
    both = where if condition is None else exp.and_(parse_expression(condition), where)
    return {"condition": sql_text(both)}


def _check(name: str, handler: str, params: dict[str, Any]) -> None:
    """Set the computation up as a node will (its expressions compiled), so that SQL a
    node could not run is refused now, naming the expression."""
    handler_class = import_object(handler, what=f"handler {handler!r}")  # as a node loads it
    assert isinstance(handler_class, type)
    computation = handler_class()
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
