"""``a JOIN b ON ...`` (and ``FROM a, b WHERE ...``) as one :class:`SqlJoin`.

The join's conditions are split into conjuncts:

- equalities between an expression of each side are its **key** (both sides keyed by
  them: read straight from a field, or written keyed by a stage before the join, or by
  the window aggregation the side comes from);
- comparisons between the sides' **time columns** (a column that is the record's
  event time plus a constant: a table's ``WATERMARK`` column, a window's start and
  end) bound the pair's times, ``left.t + lower <= right.t <= left.t + upper``: an
  interval join, and with ``lower = upper = 0`` a window join (both sides' windows
  equal). Without both bounds it is a regular join, whose state lives for Flink's
  ``table.exec.state.ttl`` (``SET``), counted in event time here;
- everything else, the time comparisons too, is the residual ``condition``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import SIDES, interval_ms, kind_of, sql_text
from millrace.streamsql._relations import Relation
from millrace.streamsql._stages import JOIN_HANDLER, NO_KEY, Stages

HOW = {"": "inner", "INNER": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}


@dataclass
class _Side:
    relation: Relation
    tag: str
    alias: str


def plan_join(
    stages: Stages,
    sides: tuple[Relation, Relation],
    *,
    how: str,
    condition: exp.Expr | None,
    ttl_ms: int | None,
    base: str,
) -> Relation:
    """The pending join of ``sides`` (each named by its alias) under ``condition``."""
    if any(side.updating for side in sides):
        raise SqlError("JOIN of an updating input (a GROUP BY without a window's rows) is "
                       "not supported yet")  # fmt: skip
    left, right = (_Side(r, tag, r.alias or tag) for r, tag in zip(sides, SIDES, strict=True))
    if left.alias == right.alias:
        raise SqlError(f"JOIN: both sides are called {left.alias!r}: give one an alias")
    conjuncts = _conjuncts(condition) if condition is not None else []
    scoped = [_scoped(c, left, right) for c in conjuncts]
    keys: list[tuple[exp.Expr, exp.Expr]] = []
    lower, upper = None, None
    residual: list[exp.Expr] = []
    for node in scoped:
        pair = _key_pair(node)
        if pair is not None:
            keys.append(pair)
        bound = _time_bound(node, left, right)
        if bound is not None:
            low, high = bound
            lower = low if lower is None or (low is not None and low > lower) else lower
            upper = high if upper is None or (high is not None and high < upper) else upper
        if pair is None or bound is not None:
            residual.append(node)
    if lower is None or upper is None:
        if ttl_ms is None:
            raise SqlError(
                "JOIN: a regular join (no time bounds between the two sides' event times) "
                "keeps every row: SET 'table.exec.state.ttl' = '1 d' (Flink's state "
                "time-to-live; in event time here) to bound its state, or join within an "
                "interval (a.ts BETWEEN b.ts - INTERVAL ... AND b.ts + INTERVAL ...)"
            )
        lower = -ttl_ms if lower is None else max(lower, -ttl_ms)
        upper = ttl_ms if upper is None else min(upper, ttl_ms)
    if lower > upper:
        raise SqlError(f"JOIN: its time conditions leave no pair ({lower} > {upper} ms)")
    inputs = _inputs(stages, left, right, keys, base)
    return _joined(left, right, how=how, inputs=inputs, residual=residual, bounds=(lower, upper))


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _scoped(node: exp.Expr, left: _Side, right: _Side) -> exp.Expr:
    """``node`` with every column naming its side (``$l``/``$r``) and visible name."""

    def swap(n: exp.Expr) -> exp.Expr:
        if not isinstance(n, exp.Column) or isinstance(n.this, exp.Star):
            return n
        side = _side_of(n, left, right)
        return exp.column(n.name, table=side.tag, quoted=True)

    return node.copy().transform(swap)


def _side_of(column: exp.Column, left: _Side, right: _Side) -> _Side:
    if column.table:
        for side in (left, right):
            if column.table == side.alias:
                if column.name not in side.relation.columns:
                    raise SqlError(f"column {sql_text(column)} not found")
                return side
        raise SqlError(f"column {sql_text(column)}: no table {column.table!r} in the join")
    found = [s for s in (left, right) if column.name in s.relation.columns]
    if len(found) != 1:
        what = "ambiguous: qualify it" if found else "not found"
        raise SqlError(f"column {column.name} is {what}")
    return found[0]


def _tags(node: exp.Expr) -> set[str]:
    return {c.table for c in node.find_all(exp.Column)}


def _key_pair(node: exp.Expr) -> tuple[exp.Expr, exp.Expr] | None:
    """``(left expression, right expression)`` of an equality between the sides."""
    if not isinstance(node, exp.EQ):
        return None
    a, b = node.this, node.expression
    if _tags(a) == {SIDES[0]} and _tags(b) == {SIDES[1]}:
        return a, b
    if _tags(a) == {SIDES[1]} and _tags(b) == {SIDES[0]}:
        return b, a
    return None


def _offset(node: exp.Expr, left: _Side, right: _Side) -> tuple[str, int] | None:
    """``(side tag, c)`` when ``node`` is a side's time column plus ``c`` ms (an
    interval literal added or subtracted)."""
    extra = 0
    while isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
        sign = 1 if isinstance(node, exp.Add) else -1
        extra += sign * interval_ms(node.expression)
        node = node.this
    if isinstance(node, exp.Paren):
        return _offset(node.this, left, right)
    if not isinstance(node, exp.Column) or node.table not in SIDES:
        return None
    side = left if node.table == left.tag else right
    offset = side.relation.time_offset(side.relation.columns[node.name])
    return None if offset is None else (node.table, offset + extra)


def _time_bound(node: exp.Expr, left: _Side, right: _Side) -> tuple[int | None, int | None] | None:
    """The bounds on ``right.t - left.t`` a conjunct sets, if it compares time columns
    of the two sides (each a time column plus a constant)."""
    if isinstance(node, exp.Between):
        low = _time_bound(exp.GTE(this=node.this, expression=node.args["low"]), left, right)
        high = _time_bound(exp.LTE(this=node.this, expression=node.args["high"]), left, right)
        if low is None and high is None:
            return None
        low, high = low or (None, None), high or (None, None)
        lowers = [b[0] for b in (low, high) if b[0] is not None]
        uppers = [b[1] for b in (low, high) if b[1] is not None]
        return (max(lowers) if lowers else None, min(uppers) if uppers else None)
    ops: dict[type[exp.Expr], tuple[int | None, int | None]] = {
        exp.EQ: (0, 0), exp.GTE: (0, None), exp.GT: (1, None), exp.LTE: (None, 0),
        exp.LT: (None, -1),
    }  # fmt: skip
    if type(node) not in ops:
        return None
    a, b = _offset(node.this, left, right), _offset(node.expression, left, right)
    if a is None or b is None or a[0] == b[0]:
        return None
    # a.value OP b.value, value = t + offset: (ta + ca) OP (tb + cb)
    low_step, high_step = ops[type(node)]
    if a[0] == SIDES[1]:  # right OP left: d = tr - tl OP cl - cr
        base = b[1] - a[1]
        return (None if low_step is None else base + low_step,
                None if high_step is None else base + high_step)  # fmt: skip
    # left OP right: tl + cl OP tr + cr  =>  d = tr - tl  (reversed OP)  cl - cr
    base = a[1] - b[1]
    return (None if high_step is None else base - high_step,
            None if low_step is None else base - low_step)  # fmt: skip


def _inputs(
    stages: Stages,
    left: _Side,
    right: _Side,
    keys: list[tuple[exp.Expr, exp.Expr]],
    base: str,
) -> dict[str, str]:
    """Each side's stream and key extractor: a side is read as it is where its key is a
    field of its stream's rows, else written keyed first (a pending aggregation keys its
    own output); the right side is copied when both would read one stream."""
    sides = (left, right)
    side_keys = [[_unscoped(k[i]) for k in keys] for i in range(2)]
    direct = [_direct_key(s, side_keys[i]) for i, s in enumerate(sides)]
    extractors: list[str | None] = [d[0] if d is not None else None for d in direct]
    if not keys:
        for side in sides:
            if side.relation.pending is not None or side.relation.where is not None:
                _write(stages, side, [], key_format="array", base=base)
        extractors = [NO_KEY, NO_KEY]
    elif None in direct or direct[0][1] != direct[1][1]:  # type: ignore[index]
        known = [d[1] for d in direct if d is not None and d[1] in ("json", "string")]
        key_format = known[0] if len(keys) == 1 and len(known) == 1 else "array"
        for i, side in enumerate(sides):
            if direct[i] is None or direct[i][1] != key_format:  # type: ignore[index]
                _write(stages, side, side_keys[i], key_format=key_format, base=base)
                extractors[i] = "key"
    if left.relation.stream == right.relation.stream:
        stream = stages.name(f"{base}_r")
        keyed = extractors[1] != NO_KEY and extractors[1] != "key"
        key = side_keys[1] if keyed else []
        _write(stages, right, key, key_format=_format(direct[1]), base=base, stream=stream)
        extractors[1] = "key" if keyed else extractors[1]
    assert extractors[0] is not None and extractors[1] is not None
    return {left.relation.stream: extractors[0], right.relation.stream: extractors[1]}


def _format(direct: tuple[str, str] | None) -> str:
    return direct[1] if direct is not None and direct[1] in ("json", "string") else "array"


def _write(
    stages: Stages,
    side: _Side,
    key: list[exp.Expr],
    *,
    key_format: str,
    base: str,
    stream: str | None = None,
) -> None:
    """Write a side's rows to a stream of their own, keyed by ``key``."""
    stream = stream or stages.name(f"{base}_{'lr'[SIDES.index(side.tag)]}")
    written = stages.write(side.relation, stream, stream, key=key, key_format=key_format)
    side.relation = written.named(side.alias)


def _unscoped(node: exp.Expr) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        return exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n

    return node.copy().transform(swap)


def _direct_key(side: _Side, keys: list[exp.Expr]) -> tuple[str, str] | None:
    """``(extractor, key format)`` reading the side's key from its stream's rows."""
    relation = side.relation
    if relation.pending is not None or relation.where is not None:
        return None
    if not keys:
        return NO_KEY, "none"
    if len(keys) != 1:
        return None
    field = relation.resolve(_unscoped(keys[0]))
    if not isinstance(field, exp.Column) or relation.is_time(field):
        return None
    kind = kind_of(field, relation.kinds)
    if kind == "string" and field.name in relation.not_null:
        return f"json:{field.name}", "string"
    if kind in ("int", "bool"):
        return f"json:{field.name}", "json"
    return None


def _qualified(node: exp.Expr, tag: str) -> exp.Expr:
    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column):
            return exp.column(n.name, table=tag, quoted=True)
        return n

    return node.copy().transform(swap)


def _joined(
    left: _Side,
    right: _Side,
    *,
    how: str,
    inputs: dict[str, str],
    residual: list[exp.Expr],
    bounds: tuple[int, int],
) -> Relation:
    """The pending join's relation: its columns over the pair's rows."""
    pair_of = {}
    for side in (left, right):
        for name, node in side.relation.columns.items():
            pair_of[(side.tag, name)] = _qualified(node, side.tag)

    def over_pair(node: exp.Expr) -> exp.Expr:
        def swap(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Column) and n.table in SIDES:
                return pair_of[(n.table, n.name)].copy()
            return n

        return node.copy().transform(swap)

    names = [n for side in (left, right) for n in side.relation.columns]
    columns = {n: node for (_, n), node in pair_of.items() if names.count(n) == 1}
    qualified = {(s.alias, n): pair_of[(s.tag, n)] for s in (left, right)
                 for n in s.relation.columns}  # fmt: skip
    kinds: dict[str, str | None] = {}
    time_fields: dict[str, int] = {}
    for side in (left, right):
        relation = side.relation
        for field, kind in relation.kinds.items():
            kinds[f"{side.tag}.{field}"] = kind
        if bounds == (0, 0):  # a window join: both sides' times are the pair's
            for field, offset in relation.time_fields.items():
                time_fields[f"{side.tag}.{field}"] = offset
    params: dict[str, object] = {
        "left": left.relation.stream,
        "right": right.relation.stream,
        "lower_ms": bounds[0],
        "upper_ms": bounds[1],
        "how": how,
    }
    if residual:
        condition = residual[0] if len(residual) == 1 else exp.and_(*residual)
        params["condition"] = sql_text(over_pair(condition))
    for key, side in (("left_time", left), ("right_time", right)):
        if side.relation.time_column is not None:
            params[key] = side.relation.time_column
    return Relation(
        stream=left.relation.stream,
        columns=columns,
        kinds=kinds,
        time_column=None,
        pending={"handler": JOIN_HANDLER, "inputs": inputs, "params": params},
        time_fields=time_fields,
        qualified=qualified,
        ambiguous=frozenset(n for n in names if names.count(n) > 1),
    )
