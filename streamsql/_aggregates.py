"""``GROUP BY`` a window: the window aggregation a grouped ``SELECT`` becomes.

The window comes from the window table-valued function in ``FROM`` (``TUMBLE``,
``HOP``, ``SESSION``, with ``GROUP BY ..., window_start, window_end``) or from a group
window in ``GROUP BY`` (``TUMBLE(ts, ...)``, ``HOP(ts, ...)``, ``SESSION(ts, ...)``,
with ``TUMBLE_START(...)`` and its kin in the ``SELECT`` list). The other ``GROUP BY``
expressions are the key; the aggregates are folded per key and window; the ``SELECT``
list and ``HAVING`` become expressions over each pane's row (the keys ``$g0, ...``,
``window_start``, ``window_end``, ``window_time`` and the aggregates ``$agg0, ...``),
so the aggregation writes the query's rows itself.

Built-in combiners (folded natively per batch) take the aggregates when they all read
one ``NOT NULL`` numeric column or none; any others take SQL's own
(``streamsql/_runtime.py``), which skip NULLs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import interval_ms, kind_of, sql_text
from millrace.streamsql._names import WINDOW_NAMES, aggregate_column, group_column
from millrace.streamsql._relations import Relation
from millrace.streamsql._stages import NO_KEY, SELECT_HANDLER, WINDOW_HANDLER, Stages

_AUXILIARY = {"_START": "window_start", "_END": "window_end", "_ROWTIME": "window_time"}
_BUILT_IN = {"count_star": "count", "count": "count", "sum": "sum", "min": "min",
             "max": "max", "avg": "mean"}  # fmt: skip


@dataclass(frozen=True)
class WindowSpec:
    """A window as the aggregation's ``window`` setting, and the call that made it."""

    setting: str
    kind: str
    time: exp.Expr | None
    """The time column, over the relation's visible columns (None: an instant's)."""
    partition: tuple[exp.Expr, ...] = ()
    size_ms: int | None = None
    """A tumbling or hopping window's size."""


def window_of(kind: str, time: exp.Expr, durations: list[exp.Expr]) -> WindowSpec:
    """``TUMBLE(size)``, ``HOP(slide, size)``, ``SESSION(gap)`` as a window setting."""
    expected = {"TUMBLE": 1, "HOP": 2, "SESSION": 1, "CUMULATE": 2}
    if kind not in expected:
        raise SqlError(f"{kind}: the windows supported are TUMBLE, HOP, CUMULATE and SESSION")
    if len(durations) != expected[kind]:
        what = {"TUMBLE": "a size", "HOP": "a slide and a size", "SESSION": "a gap",
                "CUMULATE": "a step and a size"}[kind]  # fmt: skip
        offset = " (a window offset is not supported)" if len(durations) > expected[kind] else ""
        raise SqlError(f"{kind} takes {what}{offset}")
    ms = [interval_ms(d) for d in durations]
    if any(m <= 0 for m in ms):
        raise SqlError(f"{kind}: durations must be positive")
    if kind == "TUMBLE":
        return WindowSpec(f"tumbling:{ms[0]}", kind, time, size_ms=ms[0])
    if kind == "HOP":
        return WindowSpec(f"hopping:{ms[1]}:{ms[0]}", kind, time, size_ms=ms[1])
    if kind == "CUMULATE":
        if ms[1] % ms[0]:
            raise SqlError("CUMULATE: the size must be a multiple of the step")
        return WindowSpec(f"cumulate:{ms[1]}:{ms[0]}", kind, time)  # starts not t-bound
    return WindowSpec(f"session:{ms[0]}:touching", kind, time)  # Flink's sessions: touching merge


UPDATING = WindowSpec("global", "GLOBAL", None)
"""The window of a GROUP BY without one: all of time, a row written per input row (an
updating result, as Flink's)."""

INSTANT = WindowSpec("tumbling:1", "INSTANT", None, size_ms=1)
"""The window of a GROUP BY of a column that is the event time plus a constant (an
upstream window's bounds): every row of a group has one event time, so the group is
complete once the watermark passes it (Flink's window propagation)."""


def group_window(node: exp.Expr) -> WindowSpec | None:
    """The group window a ``GROUP BY`` item is (``SESSION(ts, INTERVAL ...)``), if it is one."""
    if isinstance(node, exp.Anonymous) and node.name.upper() in ("TUMBLE", "HOP", "SESSION"):
        time, *durations = node.expressions
        return window_of(node.name.upper(), time, durations)
    return None


def _auxiliary(node: exp.Expr, window: WindowSpec) -> str | None:
    """The window column a ``TUMBLE_START(ts, ...)``-like call names, if it is one."""
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.upper()
    for suffix, column in _AUXILIARY.items():
        if name.endswith(suffix) and name[: -len(suffix)] in ("TUMBLE", "HOP", "SESSION"):
            if name[: -len(suffix)] != window.kind:
                raise SqlError(f"{name}: the query's group window is {window.kind}")
            return column
    return None


@dataclass
class Aggregate:
    """One aggregate function of a query: its kind (``SqlAggregates``') and argument."""

    kind: str
    argument: exp.Expr | None
    """Over the stream's rows (None: ``COUNT(*)``)."""


def aggregate_of(node: exp.AggFunc, relation: Relation) -> Aggregate:
    """The aggregate a call names, its argument over ``relation``'s stream's rows."""
    text = sql_text(node)
    if isinstance(node, exp.Count):
        inner = node.this
        if inner is None or isinstance(inner, exp.Star):
            return Aggregate("count_star", None)
        if isinstance(inner, exp.Distinct):
            if len(inner.expressions) != 1:
                raise SqlError(f"{text}: COUNT(DISTINCT ...) of one expression only")
            return Aggregate("count_distinct", relation.resolve(inner.expressions[0]))
        return Aggregate("count", relation.resolve(inner))
    kinds = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}
    kind = kinds.get(type(node))
    if kind is None:
        raise SqlError(f"{text}: the aggregates supported are COUNT, COUNT(DISTINCT), SUM, "
                       "MIN, MAX and AVG")  # fmt: skip
    if isinstance(node.this, exp.Distinct):
        raise SqlError(f"{text}: DISTINCT is supported in COUNT only")
    return Aggregate(kind, relation.resolve(node.this))


class GroupedSelect:
    """The aggregation of one grouped ``SELECT``: its keys, aggregates and window."""

    def __init__(self, relation: Relation, window: WindowSpec, window_columns: bool) -> None:
        """``window_columns``: the window's columns are named (``window_start``, from a
        window table function) rather than called (``TUMBLE_START(...)``)."""
        time = relation.resolve(window.time) if window.time is not None else None
        if time is not None and not relation.is_time(time):
            raise SqlError(
                f"{window.kind}({sql_text(time)}, ...): windows are over the table's "
                f"event time (its WATERMARK FOR column"
                f"{': ' + repr(relation.time_name()) if relation.time_name() else ''})"
            )
        if relation.updating and window.kind != "GLOBAL":
            raise SqlError(f"{window.kind} window over an updating input (a GROUP BY without "
                           "a window's rows) is not supported")  # fmt: skip
        self.relation = relation
        self.window = window
        self.window_columns = window_columns
        self.keys: list[exp.Expr] = []
        self.aggregates: list[Aggregate] = []
        self._aggregate_texts: list[str] = []

    def add_key(self, node: exp.Expr) -> None:
        """A ``GROUP BY`` expression (over the relation's visible columns)."""
        resolved = self.relation.resolve(node)
        if sql_text(resolved) not in [sql_text(k) for k in self.keys]:
            self.keys.append(resolved)

    def rewrite(self, node: exp.Expr, clause: str) -> exp.Expr:
        """A ``SELECT`` item or ``HAVING`` over the pane's row."""
        found = self._pane_column(node, clause)
        if found is not None:
            return found
        if isinstance(node, exp.Identifier | exp.DataType | exp.Var | exp.Interval | exp.Literal):
            return node.copy()
        if isinstance(node, exp.Column):
            raise SqlError(
                f"{clause}: column {sql_text(node)} is neither grouped (GROUP BY) nor in an "
                "aggregate"
            )
        rewritten = node.copy()
        for key, value in node.args.items():
            if isinstance(value, exp.Expr):
                rewritten.set(key, self.rewrite(value, clause))
            elif isinstance(value, list):
                rewritten.set(key, [self.rewrite(v, clause) if isinstance(v, exp.Expr)
                                    else v for v in value])  # fmt: skip
        return rewritten

    def _pane_column(self, node: exp.Expr, clause: str) -> exp.Expr | None:
        if isinstance(node, exp.AggFunc):
            return self._aggregate_column(node)
        window_column = self._window_column(node)
        if window_column is not None:
            return exp.column(window_column)
        if isinstance(node, exp.Identifier | exp.DataType | exp.Var | exp.Literal):
            return None
        try:
            text = sql_text(self.relation.resolve(node))
        except SqlError:
            return None
        for i, key in enumerate(self.keys):
            if sql_text(key) == text:
                return exp.column(group_column(i), quoted=True)
        return None

    def _window_column(self, node: exp.Expr) -> str | None:
        if self.window_columns:
            if isinstance(node, exp.Column) and node.name in WINDOW_NAMES:
                return node.name
            return None
        return _auxiliary(node, self.window)

    def _aggregate_column(self, node: exp.AggFunc) -> exp.Expr:
        aggregate = aggregate_of(node, self.relation)
        text = f"{aggregate.kind}:{sql_text(aggregate.argument) if aggregate.argument else '*'}"
        if text not in self._aggregate_texts:
            self._aggregate_texts.append(text)
            self.aggregates.append(aggregate)
        i = self._aggregate_texts.index(text)
        column = exp.column(aggregate_column(i), quoted=True)
        if aggregate.kind == "avg" and self._kind(aggregate.argument) == "int":
            return exp.Cast(this=column, to=exp.DataType.build("BIGINT"))  # Flink's AVG(BIGINT)
        return column

    def _kind(self, node: exp.Expr | None) -> str | None:
        return None if node is None else kind_of(node, self.relation.kinds)

    def pane_kinds(self) -> dict[str, str | None]:
        """The kinds of the pane row's columns."""
        kinds: dict[str, str | None] = {
            group_column(i): self._kind(k) for i, k in enumerate(self.keys)
        }
        kinds.update(dict.fromkeys(WINDOW_NAMES, "int"))
        for i, aggregate in enumerate(self.aggregates):
            counted = aggregate.kind.startswith("count")
            kinds[aggregate_column(i)] = "int" if counted else self._kind(aggregate.argument)
        return kinds

    def spec(self, stages: Stages, base: str) -> dict[str, object]:
        """The aggregation's computation (without its columns and output), reading its
        input directly when its key and values are fields of the input's rows, else
        after a stage that computes them."""
        relation = self.relation
        params: dict[str, object] = {
            "window": self.window.setting,
            "group": [group_column(i) for i in range(len(self.keys))],
        }
        direct = relation.pending is None and relation.where is None
        extractor, key_format = self._extractor() if direct else (None, None)
        if extractor is not None:
            stream = relation.stream
            built_in = self._built_in()
            if built_in is not None:
                params.update(built_in)
            else:
                params["aggregates"] = [a.kind for a in self.aggregates]
                params["arguments"] = [self._argument_text(a) for a in self.aggregates]
        else:
            stream = stages.name(f"{base}_keyed")
            key_format = "json" if len(self.keys) == 1 and self._single_format() else "array"
            pre: dict[str, object] = {
                "columns": [
                    [f"a{i}", self._argument_text(a)] for i, a in enumerate(self.aggregates)
                ],
                "key": [sql_text(k) for k in self.keys],
                "key_format": key_format,
                "shape": "values",
            }  # fmt: skip
            if relation.where is not None:
                pre["where"] = sql_text(relation.where)
            if relation.time_column is not None:
                pre["time_column"] = relation.time_column
            params["aggregates"] = [a.kind for a in self.aggregates]
            if relation.updating:  # rows, keeping what each does, not bare values
                pre.update(shape="row", changelog=True)
                params["arguments"] = [f"`a{i}`" for i in range(len(self.aggregates))]
            stages.add(stream, SELECT_HANDLER, {relation.stream: "key"}, stream, pre)
            extractor = "key"
        params["key_format"] = key_format
        if self.window.kind == "GLOBAL":  # a row per input row, each update retracting
            params.update(early_every_records=1, accumulation="retracting", updating=True)
        if relation.updating:
            params["changelog_input"] = True
        return {"handler": WINDOW_HANDLER, "inputs": {stream: extractor}, "params": params}

    def pane_time_fields(self) -> dict[str, int]:
        """The pane row's columns that are its event time (its window's last instant)
        plus a constant."""
        if self.window.kind == "GLOBAL":
            return {}
        fields = {"window_time": 0, "window_end": 1}
        size = self.window.size_ms
        if size is not None:
            fields["window_start"] = 1 - size
        if self.window.kind == "INSTANT":  # grouped by a time column: t = that - offset
            for i, key in enumerate(self.keys):
                offset = self.relation.time_offset(key)
                if offset is not None:
                    fields[group_column(i)] = offset
        return fields

    def _argument_text(self, aggregate: Aggregate) -> str:
        return "NULL" if aggregate.argument is None else sql_text(aggregate.argument)

    def _single_format(self) -> bool:
        return self._kind(self.keys[0]) in ("int", "float", "bool")

    def _extractor(self) -> tuple[str | None, str | None]:
        """The key extractor reading the key straight from the input's rows, if one can."""
        if not self.keys:
            return NO_KEY, "array"
        if len(self.keys) > 1 or not isinstance(self.keys[0], exp.Column):
            return None, None
        field = self.keys[0].name
        kind = self.relation.kinds.get(field)
        if self.relation.is_time(self.keys[0]):
            return None, None  # the key is the event time: computed, not read
        if kind == "string" and field in self.relation.not_null:
            return f"json:{field}", "string"
        if kind in ("int", "float", "bool"):
            return f"json:{field}", "json"
        return None, None

    def _built_in(self) -> dict[str, object] | None:
        """The built-in combiners' settings, when every aggregate reads one ``NOT NULL``
        numeric field of the input's rows (or none)."""
        fields = {sql_text(a.argument) for a in self.aggregates if a.argument is not None}
        if len(fields) > 1 or any(a.kind == "count_distinct" for a in self.aggregates):
            return None
        field = None
        if fields:
            argument = next(a.argument for a in self.aggregates if a.kind != "count_star")
            if (
                not isinstance(argument, exp.Column)
                or argument.name not in self.relation.not_null
                or self.relation.kinds.get(argument.name) not in ("int", "float")
                or self.relation.is_time(argument)
            ):
                return None
            field = argument.name
        parts = list(dict.fromkeys(_BUILT_IN[a.kind] for a in self.aggregates)) or ["count"]
        settings: dict[str, object] = {"aggregate": "+".join(parts)}
        if field is not None:
            settings["field"] = field
        if len(parts) > 1:
            settings["results"] = [_BUILT_IN[a.kind] for a in self.aggregates]
        return settings


def grouped_relation(
    grouped: GroupedSelect,
    items: list[tuple[str, exp.Expr]],
    having: exp.Expr | None,
    stages: Stages,
    base: str,
) -> Relation:
    """The relation of the grouped ``SELECT``: its columns over the pane rows of the
    (pending) aggregation."""
    columns = {name: grouped.rewrite(node, "SELECT") for name, node in items}
    where = grouped.rewrite(having, "HAVING") if having is not None else None
    if not grouped.aggregates and not columns:
        raise SqlError("GROUP BY: the SELECT list is empty")
    kinds = grouped.pane_kinds()
    counted = [i for i, a in enumerate(grouped.aggregates) if a.kind.startswith("count")]
    not_null = frozenset([*WINDOW_NAMES, *map(aggregate_column, counted)])
    spec = grouped.spec(stages, base)
    return Relation(
        stream=next(iter(spec["inputs"])),  # type: ignore[call-overload]
        columns=columns,
        kinds=kinds,
        not_null=not_null,
        where=where,
        time_column="window_time",
        pending=spec,
        time_fields=grouped.pane_time_fields(),
        updating=grouped.window.kind == "GLOBAL",
    )
