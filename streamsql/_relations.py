"""A relation: rows as a query sees them, over the records of one stream.

Filters and projections are not computations of their own: a relation keeps its
columns as expressions over its stream's rows and its ``WHERE`` as a condition over
them, composed as the query nests, and a stage (``streamsql/_stages.py``) computes
them once, where the plan needs rows written to a stream. A relation fed by a window
aggregation not yet written (``pending``) keeps its columns over the pane's row
instead, so the aggregation writes the query's rows itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp

from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import kind_of, sql_text


@dataclass(frozen=True)
class Relation:
    """Rows over the records of ``stream`` (or of a pending window aggregation)."""

    stream: str
    columns: dict[str, exp.Expr]
    """Each visible column: an expression over the stream's rows (unqualified columns)."""
    kinds: Mapping[str, str | None]
    """The kind of each field of the stream's rows."""
    not_null: frozenset[str] = frozenset()
    """The fields of the stream's rows that are never NULL."""
    where: exp.Expr | None = None
    time_column: str | None = None
    """The field of the stream's rows that is the records' event time."""
    alias: str | None = None
    """The name the query gives it (``FROM bid AS B``), for qualified columns."""
    pending: dict[str, Any] | None = field(default=None)
    """A window aggregation or join not yet written: its computation's spec, without
    the columns and the output it writes (the rows are then over its pane rows, or its
    pairs')."""
    time_fields: Mapping[str, int] = field(default_factory=dict)
    """Fields of the stream's rows (``$l.f`` for a pair's) that hold the record's event
    time plus a constant (a window's end is its last instant + 1): what bounds a join
    and lets a GROUP BY of them close with the watermark."""
    qualified: Mapping[tuple[str, str], exp.Expr] = field(default_factory=dict)
    """A join's columns by (table alias, name)."""
    ambiguous: frozenset[str] = frozenset()
    """A join's column names that both sides have (they must be qualified)."""
    updating: bool = False
    """Its rows update a result (a GROUP BY without a window's): each says what it
    does in ``$op``."""

    def column_kind(self, name: str) -> str | None:
        """The kind of a visible column's values."""
        return kind_of(self.columns[name], self.kinds)

    def is_time(self, node: exp.Expr) -> bool:
        """Whether ``node`` (over the stream's rows) is the event time."""
        return (
            self.time_column is not None
            and isinstance(node, exp.Column)
            and node.name == self.time_column
        )

    def time_offset(self, node: exp.Expr) -> int | None:
        """``c`` when ``node`` (over the stream's rows) is the event time plus ``c``."""
        if not isinstance(node, exp.Column):
            return None
        return self.time_fields.get(f"{node.table}.{node.name}" if node.table else node.name)

    def time_name(self) -> str | None:
        """The visible column that is the event time, if one is."""
        return next((n for n, e in self.columns.items() if self.is_time(e)), None)

    def resolve(self, node: exp.Expr) -> exp.Expr:
        """``node`` (over the visible columns) rewritten over the stream's rows."""

        def swap(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Column):
                return self.column_of(n).copy()
            return n

        return node.copy().transform(swap)

    def column_of(self, column: exp.Column) -> exp.Expr:
        """What a column reference names."""
        qualifier = column.table
        if isinstance(column.this, exp.Star):
            raise SqlError(f"{sql_text(column)}: * is only allowed as a whole SELECT list")
        if qualifier and (qualifier, column.name) in self.qualified:
            return self.qualified[(qualifier, column.name)]
        if qualifier and (self.qualified or (self.alias is not None and qualifier != self.alias)):
            raise SqlError(f"column {sql_text(column)} not found")
        if column.name in self.ambiguous:
            raise SqlError(f"column {column.name} is ambiguous: qualify it (both sides have it)")
        if column.name not in self.columns:
            known = ", ".join(self.columns)
            raise SqlError(f"column {sql_text(column)} not found (columns: {known})")
        return self.columns[column.name]

    def filtered(self, condition: exp.Expr) -> Relation:
        """The rows for which ``condition`` (over the visible columns) is TRUE."""
        resolved = self.resolve(condition)
        where = resolved if self.where is None else exp.and_(self.where, resolved)
        return replace(self, where=where)

    def projected(self, items: list[tuple[str, exp.Expr]]) -> Relation:
        """``SELECT items``: each an output name and an expression over the columns."""
        columns: dict[str, exp.Expr] = {}
        for name, node in items:
            unique, n = name, 0
            while unique in columns:  # Flink's names for a name twice: ts, ts0, ts1, ...
                unique, n = f"{name}{n}", n + 1
            columns[unique] = self.resolve(node)
        return replace(
            self,
            columns=columns,
            alias=None,
            qualified={},
            ambiguous=frozenset(),
        )

    def named(self, alias: str | None) -> Relation:
        """The relation under the name the query gives it."""
        return replace(self, alias=alias)


def output_name(node: exp.Expr, position: int) -> str:
    """A SELECT item's column name: its alias, its column's name, or ``EXPR$n``."""
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return node.name
    return f"EXPR${position}"


def unaliased(node: exp.Expr) -> exp.Expr:
    """A SELECT item's expression without its ``AS name``."""
    return node.this if isinstance(node, exp.Alias) else node
