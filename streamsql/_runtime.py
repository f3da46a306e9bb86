"""The computations a SQL plan runs on: a projection/filter and a windowed aggregation
(the joins': ``streamsql/_joined.py``).

Both are ordinary computations, named in the topology ``millrace sql`` writes
(``handler = "millrace.streamsql:SqlSelect"``) with their SQL expressions as text in
``params``; each node compiles them once when it sets the computation up
(``streamsql/_expressions.py``). Rows are JSON objects (``streamsql/_rows.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from millrace.computations import Computation, Context, Record
from millrace.dataflow import Combined, Pane, Timing, TopN, Window, WindowedAggregation
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions
from millrace.streamsql._aggregate_functions import SqlAggregates
from millrace.streamsql._expressions import compile_row_function, compile_values, parse_expression
from millrace.streamsql._names import (
    OP,
    RETRACTIONS,
    ROW_KINDS,
    ROW_NUMBER,
    SCORE,
    aggregate_column,
    aggregate_index,
    group_column,
)
from millrace.streamsql._rows import (
    ROWS,
    columns_param,
    group_key,
    group_values,
    key_format_param,
    library_settings,
    row_of,
    strings_param,
)


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
        library_settings(self, params, frozenset())
        self.output = str(params.get("output", ""))
        if not self.output:
            raise ValueError("SqlSelect needs an output stream (output = ...)")
        columns = columns_param(params, "columns")
        time_column = params.get("time_column") or None
        where = params.get("where") or None
        self._row = compile_row_function(columns, where=where, time_column=time_column)
        keys = strings_param(params, "key")
        self._key = compile_values(keys, time_column=time_column) if keys else None
        self._key_format = key_format_param(params, "key_format", "array")
        shape = params.get("shape", "row")
        if shape not in ("row", "values"):
            raise ValueError(f"shape {shape!r}: expected row or values")
        self._as_values = shape == "values"
        self._changelog = params.get("changelog") is True

    def process_record(self, ctx: Context, record: Record) -> None:
        row = row_of(record)
        t = record.event_time_ms
        out = self._row(row, t)
        if out is None:
            return
        key = record.key if self._key is None else group_key(self._key(row, t), self._key_format)
        if self._changelog:  # an updating stream's rows keep what they do
            out[OP] = row.get(OP)
        value = ROWS.dumps(list(out.values()) if self._as_values else out)
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
        library = library_settings(self, params, WindowedAggregation.SETTINGS)
        kinds = strings_param(params, "aggregates")
        if kinds:
            self.aggregate = SqlAggregates(kinds)
            self.vectorized = False
        self._top_n = params.get("top_n")
        if self._top_n is not None:  # ROW_NUMBER() <= n: the rows themselves, ranked
            if not isinstance(self._top_n, int) or isinstance(self._top_n, bool):
                raise ValueError(f"top_n {self._top_n!r}: expected a number of rows")
            self.aggregate = TopN(self._top_n, SCORE, ties=False)
            self.vectorized = False
            self._carry = compile_row_function(columns_param(params, "carry"))
            [order] = strings_param(params, "order") or ["NULL"]
            self._order = compile_values([order])
            self._sign = 1 if params.get("descending") is True else -1
        super().setup(library)
        self._group = strings_param(params, "group")
        self._key_format = key_format_param(params, "key_format", "json")
        self._results = strings_param(params, "results")
        arguments = strings_param(params, "arguments")  # the time column read as its field
        self._arguments = compile_values(arguments) if arguments else None
        output_key = strings_param(params, "output_key")  # SQL over the output row
        self._key = compile_values(output_key) if output_key else None
        self._key_format_out = key_format_param(params, "output_key_format", "array")
        columns = columns_param(params, "columns")
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
        body = row_of(record)
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
            index = aggregate_index(column)
            if (
                column == group_column(0)
                and len(self._group) == 1
                and self._key_format in key_forms
            ):
                layout.append((name, key_forms[self._key_format]))
            elif column in ("window_start", "window_end"):
                layout.append((name, column))
            elif index is not None:
                part = 0 if parts is None else parts.index(self._results[index])
                layout.append((name, f"part:{part}"))
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
            ranked = (
                self._record(pane, {**row, **item, ROW_NUMBER: rank})
                for rank, item in enumerate(pane.value, 1)
            )
            return [record for record in ranked if record is not None]
        for i, value in enumerate(self._aggregate_values(pane.value)):
            row[aggregate_column(i)] = value
        found = self._record(pane, row)
        return () if found is None else (found,)

    def _record(self, pane: Pane, row: dict[str, Any]) -> tuple[bytes, bytes] | None:
        out = self._pane_row(row, pane.window.last_ms)
        if out is None:
            return None
        if self._updating:
            out[OP] = "-U" if pane.retraction else "+U" if pane.index else "+I"
        key = pane.key if self._key is None else group_key(self._key(out, 0), self._key_format_out)
        return key, ROWS.dumps(out)

    def _aggregate_values(self, value: Any) -> list[Any]:
        if isinstance(self.aggregate, SqlAggregates):
            return list(value)
        if isinstance(self.aggregate, Combined):
            return [value[name] for name in self._results]
        return [value]
