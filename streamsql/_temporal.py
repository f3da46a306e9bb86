"""``s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.pk``: a stream joined with a
changelog table as of each record's event time (Flink's event-time temporal join),
planned onto :class:`SqlTemporalJoin` (a ``TableJoin`` in event time).

The table is declared with ``PRIMARY KEY (pk) NOT ENFORCED``; its records are keyed by
their primary key (``key`` of the injected lines) and carry the rows' changes (JSON
rows, ``null`` deleting one; or Debezium envelopes, ``'format' = 'debezium-json'``).
"""

from __future__ import annotations

from sqlglot import exp

from millrace.streamsql._catalog import Table
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import SIDES, kind_of, sql_text
from millrace.streamsql._relations import Relation
from millrace.streamsql._stages import TEMPORAL_HANDLER, Stages


def plan_temporal_join(
    stages: Stages,
    stream: Relation,
    table: Table,
    *,
    alias: str,
    as_of: exp.Expr,
    how: str,
    condition: exp.Expr | None,
    base: str,
) -> Relation:
    """The pending temporal join of ``stream`` with ``table`` (called ``alias``)."""
    if how not in ("inner", "left"):
        raise SqlError(f"{how.upper()} JOIN ... FOR SYSTEM_TIME AS OF: INNER and LEFT only")
    if stream.updating:
        raise SqlError("a temporal join of an updating input is not supported")
    stream_alias = stream.alias or SIDES[0]
    if not stream.is_time(stream.resolve(_unqualified(as_of, stream_alias))):
        raise SqlError(f"FOR SYSTEM_TIME AS OF {sql_text(as_of)}: the stream's event time "
                       "(its WATERMARK column) expected")  # fmt: skip
    assert table.primary_key is not None
    conjuncts = _conjuncts(condition)
    key = next((k for c in conjuncts if (k := _key_of(c, alias, table.primary_key)) is not None),
               None)  # fmt: skip
    if key is None:
        raise SqlError(f"JOIN {table.name} FOR SYSTEM_TIME AS OF ...: ON must equate an "
                       f"expression of the stream with {alias}.{table.primary_key}")  # fmt: skip
    residual = [c for c in conjuncts if _key_of(c, alias, table.primary_key) is None]
    if residual and how == "left":
        raise SqlError("LEFT JOIN ... FOR SYSTEM_TIME AS OF: ON holds the key equality only")
    pk_kind = next(c.kind for c in table.columns if c.name == table.primary_key)
    key_format = "string" if pk_kind == "string" else "json"
    stream_key = stream.resolve(_unqualified(key, stream_alias))
    direct = (
        stream.pending is None
        and stream.where is None
        and isinstance(stream_key, exp.Column)
        and kind_of(stream_key, stream.kinds) == pk_kind
        and (pk_kind != "string" or stream_key.name in stream.not_null)
    )
    if not direct:
        name = stages.name(f"{base}_keyed")
        stream = stages.write(stream, name, name, key=[_unqualified(key, stream_alias)],
                              key_format=key_format).named(stream_alias)  # fmt: skip
        extractor = "key"
    else:
        assert isinstance(stream_key, exp.Column)
        extractor = f"json:{stream_key.name}"
    if stream.stream == table.stream:
        raise SqlError(f"a temporal join of {table.name} with itself is not supported")
    pair: dict[tuple[str, str], exp.Expr] = {}
    for name, node in stream.columns.items():
        pair[(stream_alias, name)] = _tagged(node, SIDES[0])
    for column in table.columns:
        pair[(alias, column.name)] = exp.column(column.name, table=SIDES[1], quoted=True)
    names = [n for _, n in pair]
    kinds: dict[str, str | None] = {f"{SIDES[0]}.{f}": k for f, k in stream.kinds.items()}
    kinds.update({f"{SIDES[1]}.{c.name}": c.kind for c in table.columns})
    params: dict[str, object] = {
        "stream": stream.stream,
        "table": table.stream,
        "changelog": table.changelog,
        "how": how,
        "mode": "event_time",
    }
    if residual:
        condition_text = residual[0] if len(residual) == 1 else exp.and_(*residual)
        params["condition"] = sql_text(_over_pair(condition_text, pair))
    return Relation(
        stream=stream.stream,
        columns={n: node for (_, n), node in pair.items() if names.count(n) == 1},
        kinds=kinds,
        pending={
            "handler": TEMPORAL_HANDLER,
            "inputs": {stream.stream: extractor, table.stream: "key"},
            "params": params,
        },
        qualified=pair,
        ambiguous=frozenset(n for n in names if names.count(n) > 1),
    )


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return _conjuncts(node.this) if isinstance(node, exp.Paren) else [node]


def _key_of(node: exp.Expr, alias: str, primary_key: str) -> exp.Expr | None:
    """The stream's side of ``stream_expr = alias.pk``, if ``node`` is that."""
    if not isinstance(node, exp.EQ):
        return None
    sides: tuple[tuple[exp.Expr, exp.Expr], ...] = (
        (node.this, node.expression),
        (node.expression, node.this),
    )
    for mine, other in sides:
        if (
            isinstance(mine, exp.Column)
            and mine.table == alias
            and mine.name == primary_key
            and all(c.table != alias for c in other.find_all(exp.Column))
        ):
            return other
    return None


def _unqualified(node: exp.Expr, alias: str) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table == alias:
            return exp.column(n.name, quoted=True)
        return n

    return node.copy().transform(swap)


def _tagged(node: exp.Expr, tag: str) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        return exp.column(n.name, table=tag, quoted=True) if isinstance(n, exp.Column) else n

    return node.copy().transform(swap)


def _over_pair(node: exp.Expr, pair: dict[tuple[str, str], exp.Expr]) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column):
            found = [v for (a, name), v in pair.items()
                     if name == n.name and (not n.table or n.table == a)]  # fmt: skip
            if len(found) != 1:
                raise SqlError(f"column {sql_text(n)} is {'ambiguous' if found else 'not found'}")
            return found[0].copy()
        return n

    return node.copy().transform(swap)
