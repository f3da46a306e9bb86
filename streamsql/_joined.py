"""The SQL joins' computations: :class:`SqlJoin` (two streams, an interval) and
:class:`SqlTemporalJoin` (a stream and a changelog table, as of each record's time),
library joins whose conditions and output rows are SQL over the pair (the left side's
columns qualified ``$l``, the right's ``$r``), compiled once per node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.computations import JSON, Record
from millrace.dataflow import IntervalJoin, TableJoin
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions
from millrace.streamsql._expressions import compile_pair_function, compile_values
from millrace.streamsql._rows import (
    ROWS,
    columns_param,
    group_key,
    key_format_param,
    library_settings,
    row_of,
    strings_param,
)


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
        library = library_settings(self, params, IntervalJoin.SETTINGS)
        super().setup(library)
        times = {"left_time": params.get("left_time"), "right_time": params.get("right_time")}
        condition = params.get("condition") or None
        self._condition = compile_pair_function([], where=condition, **times) if condition else None
        self._row = compile_pair_function(columns_param(params, "columns"), **times)
        output_key = strings_param(params, "output_key")  # SQL over the output row
        self._key = compile_values(output_key) if output_key else None
        self._key_format_out = key_format_param(params, "output_key_format", "array")
        self.select = self._select
        # The last row read of each side, by its value's identity: a pair's condition
        # and its output read the same records, and one record meets many.
        self._parsed: list[tuple[Any, dict[str, Any]] | None] = [None, None]

    def _row_of(self, side: int, record: Record) -> dict[str, Any]:
        last = self._parsed[side]
        if last is not None and last[0] is record.value:
            return last[1]
        row = row_of(record)
        self._parsed[side] = (record.value, row)
        return row

    def matches(self, left: Record, right: Record) -> bool:
        """The ``condition`` over the pair's rows."""
        if self._condition is None:
            return True
        pair = (self._row_of(0, left), self._row_of(1, right), left.event_time_ms,
                right.event_time_ms)  # fmt: skip
        return self._condition(*pair) is not None

    def _select(self, left: Record | None, right: Record | None) -> Any:
        a = None if left is None else self._row_of(0, left)
        b = None if right is None else self._row_of(1, right)
        ta = None if left is None else left.event_time_ms
        tb = None if right is None else right.event_time_ms
        out = self._row(a, b, ta, tb)
        assert out is not None  # no condition in the row function
        value = ROWS.dumps(out)
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
        library = library_settings(self, params, TableJoin.SETTINGS)
        super().setup(library)
        condition = params.get("condition") or None
        self._pair = compile_pair_function(columns_param(params, "columns"), where=condition)

    def joined_value(self, key: bytes, record: bytes, row: Any) -> bytes | None:
        """The pair's SQL row (None when ``condition`` is not TRUE)."""
        left = JSON.loads(record)
        if not isinstance(left, dict):
            raise F.SqlRuntimeError(f"a row is a JSON object, not {left!r}")
        if row is not None and not isinstance(row, dict):
            raise F.SqlRuntimeError(f"a table's row is a JSON object, not {row!r}")
        out = self._pair(left, row, None, None)
        return None if out is None else ROWS.dumps(out)
