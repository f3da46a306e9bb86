"""The computations a SQL plan runs on: a projection/filter and a windowed aggregation.

Both are ordinary computations, named in the topology ``millrace sql`` writes
(``handler = "millrace.streamsql:SqlSelect"``) with their SQL expressions as text in
``params``; each node compiles them once when it sets the computation up
(``streamsql/_expressions.py``). Rows are JSON objects; a group's key is its column
value (a string as UTF-8, anything else as JSON text: what the ``json:FIELD`` key
extractor gives) or, for several columns, the JSON array of their values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from millrace.computations import JSON, Computation, Context, JsonSerde, Record
from millrace.dataflow import (
    Combined,
    IntervalJoin,
    Pane,
    TableJoin,
    Timing,
    TopN,
    Window,
    WindowedAggregation,
)
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions
from millrace.streamsql._aggregate_functions import SqlAggregates
from millrace.streamsql._expressions import (
    compile_pair_function,
    compile_row_function,
    compile_values,
    parse_expression,
)

_ROWS = JsonSerde(sort_keys=False, allow_nan=False)

KEY_FORMATS = ("string", "json", "array")
"""How a group's key is written: one string column as its UTF-8 text (``string``), one
column of any other kind as JSON text (``json``), several as a JSON array (``array``)."""

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
OP = "$op"
"""The field of an updating stream's rows saying what each does (Flink's row kinds)."""
ROW_KINDS = ("+I", "-U", "+U", "-D")
RETRACTIONS = ("-U", "-D")
SCORE = "$score"
"""A top-N's row's rank score (its ORDER BY value, negated when ascending)."""
ROW_NUMBER = "$rownum"
"""A top-N's row's place in its partition, from 1 (``ROW_NUMBER()``)."""


def group_key(values: Sequence[Any], key_format: str) -> bytes:
    """The record key of a group, in ``key_format`` (``string`` and ``json``: one value,
    as the ``json:FIELD`` key extractor writes it)."""
    if key_format != "array":
        value = values[0]
        return value.encode() if isinstance(value, str) else json.dumps(value).encode()
    return json.dumps(list(values), separators=(",", ":")).encode()


def group_values(key: bytes, key_format: str, count: int) -> list[Any]:
    """The group's column values read back from its key."""
    if key_format == "string":
        return [key.decode()]
    if key_format == "array" and count == 0:
        return []
    try:
        found = JSON.loads(key)
    except ValueError:  # a json-format column that held a string after all
        return [key.decode(errors="replace")]
    if key_format == "json":
        return [found]
    if not isinstance(found, list) or len(found) != count:
        raise F.SqlRuntimeError(f"group key {key!r} is not an array of {count} values")
    return found


def _row_of(record: Record) -> dict[str, Any]:
    row = JSON.loads(record.value)
    if not isinstance(row, dict):
        raise F.SqlRuntimeError(f"a row is a JSON object, not {row!r}")
    return row


def _columns(params: Mapping[str, Any], name: str) -> list[tuple[str, str]]:
    raw = params.get(name, [])
    if not isinstance(raw, list) or not all(
        isinstance(c, list | tuple) and len(c) == 2 and all(isinstance(p, str) for p in c)
        for c in raw
    ):
        raise ValueError(f"{name} must be a list of [name, SQL expression] pairs")
    return [(c[0], c[1]) for c in raw]


def _library_settings(
    computation: Any, params: Mapping[str, Any], library: frozenset[str]
) -> dict[str, Any]:
    """The ``params`` the library class it extends takes (ValueError naming a setting
    neither it nor the SQL computation has)."""
    unknown = sorted(set(params) - library - computation.SETTINGS)
    if unknown:
        raise ValueError(f"{type(computation).__name__} has no setting {unknown[0]!r}")
    return {k: v for k, v in params.items() if k in library}


def _strings(params: Mapping[str, Any], name: str) -> list[str]:
    raw = params.get(name, [])
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ValueError(f"{name} must be a list of strings")
    return list(raw)


class SqlSelect(Computation):
    """``SELECT columns FROM input WHERE where``: one row out per row in that passes
    (``shape = "values"``: the JSON array of the values instead, as an aggregation's
    input), keyed by ``key`` (SQL expressions; none: the input's key), with the input's
    event time."""

    setup_at_load = True
    SETTINGS = frozenset({
        "output", "columns", "where", "key", "key_format", "time_column", "shape", "changelog",
    })  # fmt: skip

    def setup(self, params: Mapping[str, Any]) -> None:
        """Compile the expressions of ``params``."""
        unknown = sorted(set(params) - self.SETTINGS)
        if unknown:
            raise ValueError(f"SqlSelect has no setting {unknown[0]!r}")
        self.output = str(params.get("output", ""))
        if not self.output:
            raise ValueError("SqlSelect needs an output stream (output = ...)")
        columns = _columns(params, "columns")
        time_column = params.get("time_column") or None
        where = params.get("where") or None
        self._row = compile_row_function(columns, where=where, time_column=time_column)
        keys = _strings(params, "key")
        self._key = compile_values(keys, time_column=time_column) if keys else None
        self._key_format = str(params.get("key_format", "array"))
        if self._key_format not in KEY_FORMATS:
            raise ValueError(f"key_format {self._key_format!r}: expected one of {KEY_FORMATS}")
        shape = params.get("shape", "row")
        if shape not in ("row", "values"):
            raise ValueError(f"shape {shape!r}: expected row or values")
        self._as_values = shape == "values"
        self._changelog = params.get("changelog") is True

    def process_record(self, ctx: Context, record: Record) -> None:
        row = _row_of(record)
        t = record.event_time_ms
        out = self._row(row, t)
        if out is None:
            return
        key = record.key if self._key is None else group_key(self._key(row, t), self._key_format)
        if self._changelog:  # an updating stream's rows keep what they do
            out[OP] = row.get(OP)
        value = _ROWS.dumps(list(out.values()) if self._as_values else out)
        ctx.produce(self.output, key, value, t)


class SqlWindowAggregate(WindowedAggregation):
    """``SELECT ... FROM TABLE(TUMBLE(...)) GROUP BY keys, window_start, window_end``:
    a :class:`~millrace.dataflow.WindowedAggregation` whose panes are written as SQL
    rows (``columns``: SQL expressions over the group's columns, ``window_start``,
    ``window_end``, ``window_time`` and the aggregates ``$agg0``, ``$agg1``, ...; a pane
    whose row fails ``having`` writes nothing).

    The aggregates are the built-in combiners of one column (``aggregate``, ``field``:
    folded natively, per batch) or SQL's (``aggregates``: their kinds, over
    ``arguments``, SQL expressions of the input row).

    ``updating``: a ``GROUP BY`` without a window (one global window, a row per input
    row): each row written says what it does to the result in ``$op`` (Flink's row
    kinds: ``+I`` a group's first row, ``-U`` the retraction of its previous one,
    ``+U`` the row replacing it); ``changelog_input``: its input is such a stream (a
    ``-U`` row is taken back)."""

    SETTINGS = WindowedAggregation.SETTINGS | {
        "group", "key_format", "columns", "having", "aggregates", "arguments", "results",
        "output_key", "output_key_format", "updating", "changelog_input", "top_n", "order",
        "descending", "carry",
    }  # fmt: skip

    def setup(self, params: Mapping[str, Any]) -> None:
        """The aggregation's settings, then the SQL ones."""
        library = _library_settings(self, params, WindowedAggregation.SETTINGS)
        kinds = _strings(params, "aggregates")
        if kinds:
            self.aggregate = SqlAggregates(kinds)
            self.vectorized = False
        self._top_n = params.get("top_n")
        if self._top_n is not None:  # ROW_NUMBER() <= n: the rows themselves, ranked
            if not isinstance(self._top_n, int) or isinstance(self._top_n, bool):
                raise ValueError(f"top_n {self._top_n!r}: expected a number of rows")
            self.aggregate = TopN(self._top_n, SCORE, ties=False)
            self.vectorized = False
            self._carry = compile_row_function(_columns(params, "carry"))
            [order] = _strings(params, "order") or ["NULL"]
            self._order = compile_values([order])
            self._sign = 1 if params.get("descending") is True else -1
        super().setup(library)
        self._group = _strings(params, "group")
        self._key_format = str(params.get("key_format", "json"))
        if self._key_format not in KEY_FORMATS:
            raise ValueError(f"key_format {self._key_format!r}: expected one of {KEY_FORMATS}")
        self._results = _strings(params, "results")
        arguments = _strings(params, "arguments")  # the time column read as its field
        self._arguments = compile_values(arguments) if arguments else None
        output_key = _strings(params, "output_key")  # SQL over the output row
        self._key = compile_values(output_key) if output_key else None
        self._key_format_out = str(params.get("output_key_format", "array"))
        if self._key_format_out not in KEY_FORMATS:
            raise ValueError(f"output_key_format {self._key_format_out!r}: one of {KEY_FORMATS}")
        columns = _columns(params, "columns")
        having = params.get("having") or None
        self._pane_row = compile_row_function(columns, where=having, time_column="window_time")
        self._updating = params.get("updating") is True
        self._changelog_input = params.get("changelog_input") is True
        if self._changelog_input:
            self.vectorized = False
            if not self.aggregate.retractable:
                raise ValueError("MIN and MAX of an updating input are not supported yet "
                                 "(they cannot take a retracted row back)")  # fmt: skip
        if having is None and self._key is None and not self._updating and self._top_n is None:
            self.native_row = self._row_layout(columns)

    def _input(self, record: Record, *, parse: bool) -> tuple[Any, bool, Any]:
        if not self._changelog_input:
            return super()._input(record, parse=parse)
        body = _row_of(record)
        op = body.get(OP)
        if op not in ROW_KINDS:
            raise F.SqlRuntimeError(f"a row of an updating stream has {OP} {op!r}")
        return self._value_of(body), op in RETRACTIONS, body

    def _emit(self, ctx: Context, window: Window, state: dict[str, Any], timing: Timing) -> None:
        if self._updating and timing is Timing.ON_TIME and not state["since"]:
            return  # the end of input: nothing changed since the group's last row
        super()._emit(ctx, window, state, timing)

    def _row_layout(self, columns: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        """The layout the native pane writer writes the rows in, when every column is
        the group's one key, a window bound or a built-in aggregate's result as it is."""
        parts = list(self.aggregate.parts) if isinstance(self.aggregate, Combined) else None
        if isinstance(self.aggregate, SqlAggregates):
            return None
        key_forms = {"string": "key_text", "json": "key_json"}
        layout = []
        for name, text in columns:
            node = parse_expression(text)
            if not isinstance(node, exp.Column) or node.table:
                return None
            column = node.name
            if column == "$g0" and len(self._group) == 1 and self._key_format in key_forms:
                layout.append((name, key_forms[self._key_format]))
            elif column in ("window_start", "window_end"):
                layout.append((name, column))
            elif column.startswith("$agg") and column[4:].isdigit():
                i = int(column[4:])
                if parts is None:
                    layout.append((name, "part:0"))
                else:
                    layout.append((name, f"part:{parts.index(self._results[i])}"))
            else:
                return None
        return layout

    def handles_timer_batches(self) -> bool:
        """Not when it keys its rows otherwise than by the group (a batch of timers
        produces records of the timers' own keys only)."""
        return super().handles_timer_batches() and self._key is None

    def _value_of(self, body: Any) -> Any:
        if self._top_n is not None:
            if not isinstance(body, dict):
                raise F.SqlRuntimeError(f"a row is a JSON object, not {body!r}")
            row = self._carry(body, 0)
            assert row is not None  # no condition
            [score] = self._order(body, 0)
            row[SCORE] = self._sign * F._number(score, "ORDER BY")
            return row
        if self._arguments is None:
            return super()._value_of(body)
        if not isinstance(body, dict):
            raise F.SqlRuntimeError(f"a row is a JSON object, not {body!r}")
        return self._arguments(body, 0)

    def pane_records(self, pane: Pane) -> Sequence[tuple[bytes, bytes]]:
        """The pane as the SQL row (none when ``having`` is not TRUE; a top-N's rows
        ranked, one record each), keyed by the group (or by ``key``: SQL expressions
        over the row, for a join downstream)."""
        row: dict[str, Any] = dict(
            zip(self._group, group_values(pane.key, self._key_format, len(self._group)),
                strict=True)
        )  # fmt: skip
        row["window_start"], row["window_end"] = pane.window.start, pane.window.end
        if self._top_n is not None:
            ranked = [{**row, **item, ROW_NUMBER: rank} for rank, item in enumerate(pane.value, 1)]
            return [r for r in map(lambda x: self._record(pane, x), ranked) if r is not None]
        for i, value in enumerate(self._aggregate_values(pane.value)):
            row[f"$agg{i}"] = value
        found = self._record(pane, row)
        return () if found is None else (found,)

    def _record(self, pane: Pane, row: dict[str, Any]) -> tuple[bytes, bytes] | None:
        out = self._pane_row(row, pane.window.last_ms)
        if out is None:
            return None
        if self._updating:
            out[OP] = "-U" if pane.retraction else "+U" if pane.index else "+I"
        key = pane.key if self._key is None else group_key(self._key(out, 0), self._key_format_out)
        return key, _ROWS.dumps(out)

    def _aggregate_values(self, value: Any) -> list[Any]:
        if isinstance(self.aggregate, SqlAggregates):
            return list(value)
        if isinstance(self.aggregate, Combined):
            return [value[name] for name in self._results]
        return [value]


def no_key(key: bytes, value: bytes) -> bytes:
    """The key extractor of a group of no columns (``GROUP BY window_start,
    window_end``): every row in one group."""
    return b""


class SqlJoin(IntervalJoin):
    """``a JOIN b ON ...``: an :class:`~millrace.dataflow.IntervalJoin` of two streams
    keyed by the join's equalities, its interval from the time conditions, whose
    residual ``condition`` and output row (``columns``) are SQL over the pair (columns
    qualified ``$l`` and ``$r``), keyed by ``output_key`` (columns of the output row;
    none: the join's key)."""

    SETTINGS = IntervalJoin.SETTINGS | {
        "condition", "columns", "left_time", "right_time", "output_key", "output_key_format",
    }  # fmt: skip

    def setup(self, params: Mapping[str, Any]) -> None:
        """The join's settings, then the SQL ones."""
        library = _library_settings(self, params, IntervalJoin.SETTINGS)
        super().setup(library)
        times = {"left_time": params.get("left_time"), "right_time": params.get("right_time")}
        condition = params.get("condition") or None
        self._condition = compile_pair_function([], where=condition, **times) if condition else None
        self._row = compile_pair_function(_columns(params, "columns"), **times)
        output_key = _strings(params, "output_key")  # SQL over the output row
        self._key = compile_values(output_key) if output_key else None
        self._key_format_out = str(params.get("output_key_format", "array"))
        if self._key_format_out not in KEY_FORMATS:
            raise ValueError(f"output_key_format {self._key_format_out!r}: one of {KEY_FORMATS}")
        self.select = self._select

    def matches(self, left: Record, right: Record) -> bool:
        """The ``condition`` over the pair's rows."""
        if self._condition is None:
            return True
        pair = (_row_of(left), _row_of(right), left.event_time_ms, right.event_time_ms)
        return self._condition(*pair) is not None

    def _select(self, left: Record | None, right: Record | None) -> Any:
        a = None if left is None else _row_of(left)
        b = None if right is None else _row_of(right)
        ta = None if left is None else left.event_time_ms
        tb = None if right is None else right.event_time_ms
        out = self._row(a, b, ta, tb)
        assert out is not None  # no condition in the row function
        value = _ROWS.dumps(out)
        if self._key is None:
            return value
        t = max(x for x in (ta, tb) if x is not None)
        key = group_key(self._key(out, 0), self._key_format_out)
        return Record(self.output, key, value, t)


class SqlTemporalJoin(TableJoin):
    """``s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.pk``: a
    :class:`~millrace.dataflow.TableJoin` in event time (each record meets the row its
    key had at the record's time) whose output row (``columns``: SQL over the pair,
    the record's columns qualified ``$l``, the row's ``$r``) and residual ``condition``
    are SQL."""

    SETTINGS = TableJoin.SETTINGS | {"columns", "condition"}

    def setup(self, params: Mapping[str, Any]) -> None:
        """The join's settings, then the SQL ones."""
        library = _library_settings(self, params, TableJoin.SETTINGS)
        super().setup(library)
        condition = params.get("condition") or None
        self._pair = compile_pair_function(_columns(params, "columns"), where=condition)

    def joined_value(self, key: bytes, record: bytes, row: Any) -> bytes | None:
        """The pair's SQL row (None when ``condition`` is not TRUE)."""
        left = JSON.loads(record)
        if not isinstance(left, dict):
            raise F.SqlRuntimeError(f"a row is a JSON object, not {left!r}")
        if row is not None and not isinstance(row, dict):
            raise F.SqlRuntimeError(f"a table's row is a JSON object, not {row!r}")
        out = self._pair(left, row, None, None)
        return None if out is None else _ROWS.dumps(out)
