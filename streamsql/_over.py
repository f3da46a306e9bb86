"""``OVER`` aggregates: ``SELECT ..., AVG(x) OVER (PARTITION BY k ORDER BY t ROWS
BETWEEN n PRECEDING AND CURRENT ROW) FROM ...``, every input row written once more
with aggregates over its frame (Flink's over aggregation).

The input is written keyed by the partition, and one :class:`SqlOverAggregate`
(``streamsql/_over_aggregate.py``) keeps each partition's rows in order. Over an
append-only input the order is the event time (Flink's rule: ``ORDER BY`` the time
attribute, ascending) and a row is written once the watermark passes it; over an
updating input (an unwindowed ``GROUP BY``'s rows) any numeric ``ORDER BY`` column
orders the rows and the result updates as they do.
"""

from __future__ import annotations

from sqlglot import exp

from millrace.streamsql._aggregates import Aggregate, aggregate_of
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import interval_ms, kind_of, sql_text
from millrace.streamsql._names import over_column
from millrace.streamsql._relations import Relation
from millrace.streamsql._stages import OVER_HANDLER, Stages

FRAMES = (
    "ROWS BETWEEN n PRECEDING AND CURRENT ROW, ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "CURRENT ROW, RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW, RANGE BETWEEN "
    "UNBOUNDED PRECEDING AND CURRENT ROW (the default)"
)


def with_named_windows(select: exp.Select) -> exp.Select:
    """``select`` with its ``WINDOW w AS (...)`` clause written into each ``OVER w``."""
    named = {w.name: w for w in select.args.get("windows") or []}
    if not named and not any(
        w.args.get("alias") is not None for e in select.expressions for w in e.find_all(exp.Window)
    ):
        return select

    def inline(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Window) or node.args.get("alias") is None:
            return node
        name = node.args["alias"].name
        if name not in named:
            raise SqlError(f"OVER {name}: no WINDOW {name} AS (...) in this SELECT")
        spec = named[name]
        return exp.Window(
            this=node.this.copy(),
            partition_by=[p.copy() for p in spec.args.get("partition_by") or []],
            order=spec.args["order"].copy() if spec.args.get("order") else None,
            spec=spec.args["spec"].copy() if spec.args.get("spec") else None,
            over="OVER",
        )

    inlined = select.copy()
    inlined.set("windows", None)
    inlined.set("expressions", [e.transform(inline) for e in inlined.expressions])
    return inlined


def over_windows(items: list[tuple[str, exp.Expr]]) -> list[exp.Window]:
    """The ``OVER`` aggregates of a SELECT list."""
    return [w for _, node in items for w in node.find_all(exp.Window)]


def plan_over(
    stages: Stages, relation: Relation, items: list[tuple[str, exp.Expr]], base: str
) -> Relation:
    """The rows of ``items`` (expressions over ``relation``'s columns, some holding
    ``OVER`` aggregates) for every row of ``relation``: pending on the
    :class:`SqlOverAggregate` that writes them (its columns over the input's row and
    the aggregates' results)."""
    windows = over_windows(items)
    first = windows[0]
    shape = _shape(first)
    for window in windows[1:]:
        if _shape(window) != shape:
            raise SqlError(f"{sql_text(window)}: the OVER aggregates of one SELECT must share "
                           "one PARTITION BY, ORDER BY and frame")  # fmt: skip
    order = first.args.get("order")
    if order is None or len(order.expressions) != 1 or order.expressions[0].args.get("desc"):
        raise SqlError(f"{sql_text(first)}: OVER (... ORDER BY one column ascending) expected")
    ordered = order.expressions[0].this
    frame = _frame(first)
    if not relation.updating and not relation.is_time(relation.resolve(ordered)):
        raise SqlError(f"{sql_text(first)}: ORDER BY the table's event time (its WATERMARK "
                       "column), as Flink requires of an append-only input")  # fmt: skip
    partition = list(first.args.get("partition_by") or [])
    stream = stages.name(f"{base}_partitioned")
    keyed = stages.write(relation, stream, stream, key=partition, key_format="array")
    keyed = keyed.named(relation.alias)
    aggregates: list[Aggregate] = []
    kinds = dict(keyed.kinds)

    def aggregated(n: exp.Expr) -> exp.Expr:
        """An OVER aggregate as the column of its result."""
        if not isinstance(n, exp.Window):
            return n
        if not isinstance(n.this, exp.AggFunc):
            raise SqlError(f"{sql_text(n)}: OVER takes COUNT, SUM, MIN, MAX or AVG")
        aggregate = aggregate_of(n.this, keyed)
        if aggregate.kind == "count_distinct":
            raise SqlError(f"{sql_text(n)}: COUNT(DISTINCT ...) OVER is not supported")
        column = exp.column(over_column(len(aggregates)), quoted=True)
        aggregates.append(aggregate)
        of = None if aggregate.argument is None else kind_of(aggregate.argument, keyed.kinds)
        kinds[column.name] = "int" if aggregate.kind.startswith("count") else of
        if aggregate.kind == "avg" and of == "int":
            return exp.Cast(this=column, to=exp.DataType.build("BIGINT"))  # Flink's AVG
        return column

    columns = [(name, keyed.resolve(node).transform(aggregated)) for name, node in items]
    params: dict[str, object] = {
        "order": [sql_text(keyed.resolve(ordered))],
        "frame": frame,
        "aggregates": [a.kind for a in aggregates],
        "arguments": ["NULL" if a.argument is None else sql_text(a.argument) for a in aggregates],
    }
    if keyed.updating:
        params["changelog_input"] = True
    return Relation(
        stream=stream,
        columns=dict(columns),
        kinds=kinds,
        not_null=keyed.not_null,
        time_column=keyed.time_column,
        pending={"handler": OVER_HANDLER, "inputs": {stream: "key"}, "params": params},
        time_fields=keyed.time_fields,
        updating=keyed.updating,
    )


def _shape(window: exp.Window) -> str:
    bare = window.copy()
    bare.set("this", exp.Star())
    return sql_text(bare)


def _frame(window: exp.Window) -> dict[str, int | None]:
    spec = window.args.get("spec")
    if spec is None:
        return {"range_ms": None}
    kind = str(spec.args.get("kind") or "").upper()
    start, side = spec.args.get("start"), str(spec.args.get("start_side") or "").upper()
    end = spec.args.get("end")
    if side != "PRECEDING" or str(end).upper() != "CURRENT ROW" or kind not in ("ROWS", "RANGE"):
        raise SqlError(f"{sql_text(window)}: the frames supported are {FRAMES}")
    if str(start).upper() == "UNBOUNDED":
        return {"rows" if kind == "ROWS" else "range_ms": None}
    if kind == "ROWS":
        if not (isinstance(start, exp.Literal) and not start.is_string and start.name.isdigit()):
            raise SqlError(f"{sql_text(window)}: ROWS BETWEEN n PRECEDING: n a whole number")
        return {"rows": int(start.name)}
    return {"range_ms": interval_ms(start)}
