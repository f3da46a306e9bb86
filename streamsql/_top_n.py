"""Window Top-N: ``ROW_NUMBER() OVER (PARTITION BY window_start, window_end ... ORDER BY
x DESC) AS rownum`` in a subquery, and ``WHERE rownum <= N`` around it (Flink's form).

The partition includes a window's bounds, so every row of a partition has one event
time: the rows are kept per partition (the ``N`` best by ``x``, ties broken by the
rows' canonical JSON text, so a backfill ranks as the online run does) and written,
ranked, once the watermark passes that time: one :class:`SqlWindowAggregate` of a
per-instant window whose aggregate is :class:`~millrace.dataflow.TopN`.
"""

from __future__ import annotations

from sqlglot import exp

from millrace.streamsql._aggregates import INSTANT, WindowSpec
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import kind_of, sql_text
from millrace.streamsql._names import ROW_NUMBER, group_column
from millrace.streamsql._relations import Relation, output_name, unaliased
from millrace.streamsql._stages import NO_KEY, RANKING_HANDLER, WINDOW_HANDLER, Stages


def row_number_item(select: exp.Expr) -> tuple[int, exp.Window] | None:
    """The position and window of a ``ROW_NUMBER() OVER (...)`` item of a SELECT."""
    if not isinstance(select, exp.Select):
        return None
    for position, item in enumerate(select.expressions):
        node = unaliased(item)
        if isinstance(node, exp.Window) and isinstance(node.this, exp.RowNumber):
            return position, node
    return None


def plan_top_n(
    stages: Stages,
    ranked: Relation,
    over: exp.Window,
    *,
    rownum: str,
    where: exp.Expr | None,
    base: str,
    window: WindowSpec | None = None,
    items: list[tuple[str, exp.Expr]] | None = None,
) -> tuple[Relation, exp.Expr | None]:
    """The top-N of ``ranked`` (the subquery's rows without its ROW_NUMBER item) and the
    rest of the outer ``where`` (its ``rownum <= N`` taken as the N). With ``window``
    (ranked straight over a window function's rows), ``ranked`` is the windowed table
    and ``items`` the subquery's other items (``window_start``, ``window_end`` among
    them): the window's own aggregation ranks the rows."""
    if window is not None:
        return _over_window(
            ranked, over, rownum=rownum, where=where, window=window, items=items or []
        )
    n, rest = _limit(where, rownum)
    partition = list(over.args.get("partition_by") or [])
    order = over.args.get("order")
    if order is None or len(order.expressions) != 1:
        raise SqlError("ROW_NUMBER() OVER (... ORDER BY one expression) expected")
    ordered = order.expressions[0]
    if ranked.pending is not None or ranked.where is not None or ranked.updating:
        if ranked.updating:
            raise SqlError("ROW_NUMBER() over an updating input is not supported yet")
        ranked = stages.materialized(ranked, f"{base}_ranked")
    keys = [ranked.resolve(p) for p in partition]
    if not any(ranked.time_offset(k) is not None for k in keys):
        no_window = _over_no_window(
            stages, ranked, partition=partition, ordered=ordered, n=n, rownum=rownum, base=base
        )
        return no_window, rest
    extractor, key_format = _extractor(ranked, keys)
    if extractor is None:
        stream = stages.name(f"{base}_partitioned")
        ranked = stages.write(ranked, stream, stream, key=partition, key_format="array")
        keys = [ranked.resolve(p) for p in partition]
        extractor, key_format = "key", "array"
    carried = {name: sql_text(node) for name, node in ranked.columns.items()}
    params: dict[str, object] = {
        "window": INSTANT.setting,
        "group": [group_column(i) for i in range(len(keys))],
        "key_format": key_format,
        "top_n": n,
        "order": [sql_text(ranked.resolve(ordered.this))],
        "descending": bool(ordered.args.get("desc")),
        "carry": [[name, text] for name, text in carried.items()],
    }
    columns: dict[str, exp.Expr] = {name: exp.column(name, quoted=True) for name in ranked.columns}
    columns[rownum] = exp.column(ROW_NUMBER, quoted=True)
    kinds = {name: ranked.column_kind(name) for name in ranked.columns}
    kinds[ROW_NUMBER] = "int"
    offsets = {
        name: offset
        for name, node in ranked.columns.items()
        if (offset := ranked.time_offset(node)) is not None
    }
    relation = Relation(
        stream=ranked.stream,
        columns=columns,
        kinds=kinds,
        not_null=frozenset({ROW_NUMBER}),
        time_column="window_time",
        pending={
            "handler": WINDOW_HANDLER,
            "inputs": {ranked.stream: extractor},
            "params": params,
        },
        time_fields={**offsets, "window_time": 0},
    )
    return relation, rest


def _over_window(
    table: Relation,
    over: exp.Window,
    *,
    rownum: str,
    where: exp.Expr | None,
    window: WindowSpec,
    items: list[tuple[str, exp.Expr]],
) -> tuple[Relation, exp.Expr | None]:
    n, rest = _limit(where, rownum)
    if window.kind == "SESSION":
        raise SqlError("ROW_NUMBER() over SESSION windows' rows is not supported yet")
    bounds = {"window_start", "window_end"}
    partition = list(over.args.get("partition_by") or [])
    named = {p.name for p in partition if isinstance(p, exp.Column)}
    if not bounds <= named:
        raise SqlError("ROW_NUMBER() over a window function's rows: PARTITION BY must "
                       "include window_start and window_end")  # fmt: skip
    keys = [table.resolve(p) for p in partition if not (isinstance(p, exp.Column)
                                                         and p.name in bounds)]  # fmt: skip
    if table.pending is not None or table.where is not None:
        raise SqlError("ROW_NUMBER() over a filtered window function's rows: not supported "
                       "yet (filter in the query around it)")  # fmt: skip
    extractor, key_format = _extractor(table, keys)
    if extractor is None:
        raise SqlError("ROW_NUMBER() over a window function's rows: PARTITION BY the "
                       "window and at most one integer column")  # fmt: skip
    windowed = {
        name: node.name
        for name, node in items
        if isinstance(node, exp.Column) and node.name in (*bounds, "window_time")
    }
    carried = [(name, node) for name, node in items if name not in windowed]
    order = over.args.get("order")
    if order is None or len(order.expressions) != 1:
        raise SqlError("ROW_NUMBER() OVER (... ORDER BY one expression) expected")
    params: dict[str, object] = {
        "window": window.setting,
        "group": [group_column(i) for i in range(len(keys))],
        "key_format": key_format,
        "top_n": n,
        "order": [sql_text(table.resolve(order.expressions[0].this))],
        "descending": bool(order.expressions[0].args.get("desc")),
        "carry": [[name, sql_text(table.resolve(node))] for name, node in carried],
    }
    columns: dict[str, exp.Expr] = {name: exp.column(name, quoted=True) for name, _ in items}
    for name, bound in windowed.items():
        columns[name] = exp.column(bound)
    columns[rownum] = exp.column(ROW_NUMBER, quoted=True)
    kinds: dict[str, str | None] = {name: kind_of(table.resolve(node), table.kinds)
                                    for name, node in carried}  # fmt: skip
    kinds.update({ROW_NUMBER: "int", "window_start": "int", "window_end": "int"})
    time_fields = {"window_time": 0, "window_end": 1}
    if window.size_ms is not None:
        time_fields["window_start"] = 1 - window.size_ms
    relation = Relation(
        stream=table.stream,
        columns=columns,
        kinds=kinds,
        not_null=frozenset({ROW_NUMBER, "window_start", "window_end"}),
        time_column="window_time",
        pending={
            "handler": WINDOW_HANDLER,
            "inputs": {table.stream: extractor},
            "params": params,
        },
        time_fields=time_fields,
    )
    return relation, rest


def _over_no_window(
    stages: Stages,
    ranked: Relation,
    *,
    partition: list[exp.Expr],
    ordered: exp.Ordered,
    n: int,
    rownum: str,
    base: str,
) -> Relation:
    """A Top-N over no window: the rows keyed by the partition, then a
    :class:`SqlRanking` keeping each partition's ``n`` best; an updating result."""
    stream = stages.name(f"{base}_partitioned")
    keyed = stages.write(ranked, stream, stream, key=partition, key_format="array")
    output = stages.name(f"{base}_ranked")
    stages.add(output, RANKING_HANDLER, {stream: "key"}, output, {
        "top_n": n,
        "order": [sql_text(keyed.resolve(ordered.this))],
        "descending": bool(ordered.args.get("desc")),
    })  # fmt: skip
    columns: dict[str, exp.Expr] = {name: exp.column(name, quoted=True) for name in keyed.columns}
    columns[rownum] = exp.column(ROW_NUMBER, quoted=True)
    return Relation(
        stream=output,
        columns=columns,
        kinds={**keyed.kinds, ROW_NUMBER: "int"},
        not_null=keyed.not_null | {ROW_NUMBER},
        updating=True,
    )


def _extractor(relation: Relation, keys: list[exp.Expr]) -> tuple[str | None, str]:
    if not keys:
        return NO_KEY, "array"
    if len(keys) == 1 and isinstance(keys[0], exp.Column):
        kind = kind_of(keys[0], relation.kinds)
        if kind in ("int", "bool") and not relation.is_time(keys[0]):
            return f"json:{keys[0].name}", "json"
    return None, "array"


def _limit(where: exp.Expr | None, rownum: str) -> tuple[int, exp.Expr | None]:
    """``N`` of ``rownum <= N`` (or ``< N``, ``= 1``) among the conjuncts of ``where``,
    and the other conjuncts."""
    conjuncts = list(where.flatten()) if isinstance(where, exp.And) else [where] if where else []
    found, rest = None, []
    for node in conjuncts:
        limit = _row_limit(node, rownum)
        if limit is None:
            rest.append(node)
        else:
            found = limit if found is None else min(found, limit)
    if found is None or found < 1:
        raise SqlError(f"ROW_NUMBER() ... AS {rownum}: the query around it needs "
                       f"WHERE {rownum} <= N (a Top-N), N at least 1")  # fmt: skip
    remaining = None if not rest else rest[0] if len(rest) == 1 else exp.and_(*rest)
    return found, remaining


def _row_limit(node: exp.Expr, rownum: str) -> int | None:
    ops: dict[type[exp.Expr], int] = {exp.LTE: 0, exp.LT: -1, exp.EQ: 0}
    if type(node) not in ops:
        return None
    column, limit = node.this, node.expression
    if not (isinstance(column, exp.Column) and column.name == rownum):
        return None
    if not (isinstance(limit, exp.Literal) and not limit.is_string and limit.name.isdigit()):
        raise SqlError(f"{sql_text(node)}: compare {rownum} with a whole number")
    n = int(limit.name) + ops[type(node)]
    if isinstance(node, exp.EQ) and n != 1:
        raise SqlError(f"{sql_text(node)}: only {rownum} = 1 (or <= N) is supported")
    return n


def top_n_item_name(select: exp.Select, position: int) -> str:
    """The ROW_NUMBER item's column name."""
    return output_name(select.expressions[position], position)
