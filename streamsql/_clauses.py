"""What the planner checks of a query's clauses and a statement's shape, and the small
rewrites it makes of them (a sink's column types, the branches of a UNION ALL)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from millrace.streamsql._aggregates import (
    INSTANT,
    UPDATING,
    GroupedSelect,
    WindowSpec,
    group_window,
)
from millrace.streamsql._catalog import Table
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import sql_text
from millrace.streamsql._names import WINDOW_NAMES
from millrace.streamsql._relations import Relation
from millrace.streamsql._top_n import row_number_item

MIXED_UNION = (
    "UNION ALL: the branches give different kinds of rows (one updating: a GROUP BY "
    "without a window's)"
)

SUPPORTED_CLAUSES = {
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "qualify": "QUALIFY",
    "distinct": "SELECT DISTINCT",
    "with_": "WITH",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
}
"""Clauses of a SELECT not planned yet, and how the error names them."""


def as_sink_types(relation: Relation, sink: Table) -> Relation:
    """The relation's columns converted to the sink's column types, as ``INSERT`` does:
    a number into a ``BIGINT`` column truncated, into a ``DECIMAL(p, s)`` one rounded to
    ``s`` digits, anything into a ``VARCHAR`` one as text."""
    columns = dict(relation.columns)
    for (name, node), column in zip(relation.columns.items(), sink.columns, strict=True):
        kind = relation.column_kind(name)
        if column.scale is not None and kind in ("int", "float", None):
            scale = exp.Literal.number(column.scale)
            columns[name] = exp.Round(this=node.copy(), decimals=scale)
        elif column.kind in ("int", "string") and kind != column.kind:
            to = "BIGINT" if column.kind == "int" else "VARCHAR"
            columns[name] = exp.Cast(this=node.copy(), to=exp.DataType.build(to))
    return replace(relation, columns=columns)


def is_window_function(node: exp.Expr) -> bool:
    return isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous)


def ranked_subquery(node: exp.Expr) -> tuple[int, exp.Window] | None:
    if isinstance(node, exp.Subquery):
        return row_number_item(node.this)
    return None


def is_time(relation: Relation, node: exp.Expr) -> bool:
    """Whether ``node`` is a column holding the event time plus a constant."""
    try:
        return relation.time_offset(relation.resolve(node)) is not None
    except SqlError:
        return False


def is_window_bound(node: exp.Expr) -> bool:
    """Whether ``node`` names a window table function's column (``window_start``,
    ``window_end``, ``window_time``: a GROUP BY of them groups by the window)."""
    return isinstance(node, exp.Column) and node.name in WINDOW_NAMES


def union_branches(query: exp.Expr) -> list[exp.Expr]:
    if isinstance(query, exp.Union) and not query.args.get("distinct"):
        return [*union_branches(query.left), *union_branches(query.right)]
    return [query]


def no_nested_queries(select: exp.Select) -> None:
    """Refuse ``OVER`` windows but the SELECT list's aggregates, and queries inside
    expressions, naming them."""
    parts = [*select.expressions, select.args.get("where"), select.args.get("having")]
    for part in filter(None, parts):
        window = part.find(exp.Window)
        if window is not None and isinstance(window.this, exp.RowNumber):
            raise SqlError(f"{sql_text(window)}: ROW_NUMBER() is supported as a Top-N only: "
                           "in a subquery, with WHERE rownum <= N around it")  # fmt: skip
        if window is not None and part not in select.expressions:
            raise SqlError(f"{sql_text(window)}: an OVER aggregate is allowed in the SELECT "
                           "list only")  # fmt: skip
        nested = part.find(exp.Select)
        if nested is not None:
            raise SqlError(f"({sql_text(nested)}): a query inside an expression (IN (SELECT "
                           "...), EXISTS, a scalar subquery) is not supported")  # fmt: skip


def no_aggregates(node: exp.Expr, clause: str) -> None:
    found = node.find(exp.AggFunc)
    if found is not None:
        raise SqlError(f"{clause}: aggregate {sql_text(found)} is not allowed here")


def head(statement: exp.Expr) -> str:
    text = " ".join(sql_text(statement).split())
    return text if len(text) <= 60 else text[:57] + "..."


def supported() -> str:
    return (
        "supported: projections, WHERE, GROUP BY with TUMBLE/HOP/SESSION windows, "
        "COUNT/SUM/MIN/MAX/AVG/COUNT(DISTINCT), HAVING, OVER aggregates, UNION ALL, views "
        "and subqueries"
    )


def grouped_select(
    relation: Relation, window: WindowSpec | None, group: exp.Group | None
) -> GroupedSelect:
    """The aggregation of a grouped SELECT over ``relation``: its window (the FROM's
        window function, a group window in GROUP BY, an instant for a GROUP BY of time
    columns, else none: an updating result) and its keys."""
    keys = list(group.expressions) if group is not None else []
    windows = [w for w in (group_window(k) for k in keys) if w is not None]
    if window is not None:
        named = {k.name for k in keys if isinstance(k, exp.Column)}
        if not {"window_start", "window_end"} <= named:
            raise SqlError(f"{window.kind}(TABLE ...): GROUP BY must include "
                           "window_start and window_end")  # fmt: skip
        if windows:
            raise SqlError("GROUP BY: a group window over a window table function")
        grouped = GroupedSelect(relation, window, window_columns=True)
        plain = [k for k in keys if not is_window_bound(k)]
    elif not windows and not relation.updating and any(is_time(relation, k) for k in keys):
        grouped = GroupedSelect(relation, INSTANT, window_columns=False)
        plain = keys
    else:
        if len(windows) > 1:
            raise SqlError("GROUP BY: one group window at most")
        window = windows[0] if windows else UPDATING
        grouped = GroupedSelect(relation, window, window_columns=False)
        plain = [k for k in keys if group_window(k) is None]
    for key in plain:
        no_aggregates(key, "GROUP BY")
        grouped.add_key(key)
    for column in grouped.window.partition:
        resolved = sql_text(relation.resolve(column))
        if resolved not in [sql_text(k) for k in grouped.keys]:
            raise SqlError(f"SESSION(... PARTITION BY {sql_text(column)}): the partition "
                           "columns must be in GROUP BY")  # fmt: skip
    return grouped
