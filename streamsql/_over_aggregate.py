"""The computation an ``OVER`` aggregate runs on: every input row written once more
with aggregates over its frame, the rows of its partition (the record's key) ordered
by ``ORDER BY`` up to it.

An append-only input is ordered by its event time, as Flink's: a row waits for the
watermark to pass its time (a timer per time), then is written with its frame's
aggregates, and only the rows a later frame can still reach are kept (the last ``n``
for ``ROWS n PRECEDING``, the last interval's for ``RANGE``, an accumulator for
``UNBOUNDED PRECEDING``); a row behind what was written is late, reported and dropped.
An updating input (its rows' ``$op``) is kept whole, ordered by the ``ORDER BY`` value
(ties by the rows' canonical JSON text, so a backfill orders them as the online run
does): each change takes back the rows whose frames it changes (``-D``) and writes
them anew (``+I``).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from millrace.computations import Computation, Context, FiredTimer, Record
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions
from millrace.streamsql._aggregate_functions import SqlAggregates
from millrace.streamsql._expressions import compile_row_function, compile_values
from millrace.streamsql._names import OP, RETRACTIONS, ROW_KINDS, over_column
from millrace.streamsql._rows import (
    ROWS,
    canonical_text,
    columns_param,
    group_key,
    key_format_param,
    library_settings,
    row_of,
    strings_param,
)

_PENDING = "p"
"""Tags of rows waiting for the watermark: ``p<time>/<row text>``, a count each."""
_TIMER = "t"
_FRAME = "frame"
"""What later frames can still reach: ``[[time, arguments], ...]`` (or an accumulator)."""
_WRITTEN = "done"
"""The last time written (an append-only input's later rows behind it are late)."""
_ENTRIES = "rows"
"""An updating input's rows: ``[[order, row text], ...]`` sorted."""


def _sortable(value: int) -> str:
    """An int64 as 16 hex digits that sort as the numbers do."""
    return f"{value + (1 << 63):016x}"


class SqlOverAggregate(Computation):
    """``agg(x) OVER (PARTITION BY k ORDER BY t frame)``: each row of the input (keyed
    by the partition) written with ``columns`` (SQL over the row and the aggregates'
    results ``$over0``, ``$over1``, ...). ``frame``: ``{"rows": n}`` (``n PRECEDING``,
    null: unbounded) or ``{"range_ms": ms}`` (null: unbounded, the default frame);
    ``aggregates``: SQL's kinds, over ``arguments`` (SQL over the row); ``order``: the
    ``ORDER BY`` value; ``where``: a condition over the output's columns' inputs (a row
    failing it is not written); ``output_key``: SQL over the output row keying it (none:
    the partition); ``changelog_input``: the input is an updating stream."""

    SETTINGS = frozenset({
        "output", "order", "frame", "aggregates", "arguments", "columns", "where",
        "changelog_input", "output_key", "output_key_format",
    })  # fmt: skip

    def setup(self, params: Mapping[str, Any]) -> None:
        """Compile the expressions of ``params`` and read the frame."""
        library_settings(self, params, frozenset())
        self.output = str(params.get("output", ""))
        if not self.output:
            raise ValueError("SqlOverAggregate needs an output stream (output = ...)")
        self._aggregates = SqlAggregates(strings_param(params, "aggregates"))
        self._arguments = compile_values(strings_param(params, "arguments"))
        [order] = strings_param(params, "order") or ["NULL"]
        self._order = compile_values([order])
        where = params.get("where") or None
        self._row = compile_row_function(columns_param(params, "columns"), where=where)
        output_key = strings_param(params, "output_key")  # SQL over the output row
        self._key = compile_values(output_key) if output_key else None
        self._key_format = key_format_param(params, "output_key_format", "array")
        frame = params.get("frame")
        if (
            not isinstance(frame, dict)
            or len(frame) != 1
            or not (frame.keys() <= {"rows", "range_ms"})
        ):
            raise ValueError(f"frame {frame!r}: expected {{rows: n}} or {{range_ms: ms}}")
        [(self._unit, self._extent)] = frame.items()
        if self._extent is not None and (
            not isinstance(self._extent, int) or isinstance(self._extent, bool)
            or self._extent < 0
        ):  # fmt: skip
            raise ValueError(f"frame {frame!r}: the extent is a whole number or null")
        self._updating = params.get("changelog_input") is True

    @property
    def _unbounded(self) -> bool:
        return self._extent is None

    # -- an append-only input, in event time -------------------------------------

    def process_record(self, ctx: Context, record: Record) -> None:
        row = row_of(record)
        if self._updating:
            self._update(ctx, record, row)
            return
        t = record.event_time_ms
        written = ctx.get_state(_WRITTEN, ROWS)
        if written is not None and t <= written:
            ctx.report_late(record)  # its frame's rows were written without it
            return
        tag = f"{_PENDING}{_sortable(t)}/{canonical_text(row)}"
        ctx.put_state(tag, (ctx.get_state(tag, ROWS) or 0) + 1, ROWS)
        ctx.set_timer(f"{_TIMER}{_sortable(t)}", t)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        t = timer.time_ms
        due = ctx.scan_state(_PENDING, ROWS, end=_sortable(t + 1))
        if not due:
            return
        rows: list[dict[str, Any]] = []
        for tag, count in due:
            ctx.delete_state(tag)
            row = json.loads(tag.partition("/")[2])
            rows.extend([row] * count)
        frame = ctx.get_state(_FRAME, ROWS)
        if self._unbounded:
            accumulator = frame if frame is not None else self._aggregates.create()
            self._write_unbounded(ctx, rows, t, accumulator)
        else:
            self._write_bounded(ctx, rows, t, frame or [])
        ctx.put_state(_WRITTEN, t, ROWS)

    def _write_unbounded(
        self, ctx: Context, rows: list[dict[str, Any]], t: int, accumulator: Any
    ) -> None:
        peers = self._unit == "range_ms"  # RANGE: the rows of one time see each other
        if peers:
            for row in rows:
                accumulator = self._aggregates.add(accumulator, self._arguments(row, t))
        for row in rows:
            if not peers:
                accumulator = self._aggregates.add(accumulator, self._arguments(row, t))
            self._produce(ctx, row, t, self._aggregates.result(accumulator))
        ctx.put_state(_FRAME, accumulator, ROWS)

    def _write_bounded(
        self, ctx: Context, rows: list[dict[str, Any]], t: int, frame: list[Any]
    ) -> None:
        if self._unit == "range_ms":
            frame = [e for e in frame if e[0] >= t - self._extent]
            frame.extend([t, self._arguments(row, t)] for row in rows)
            results = self._fold(e[1] for e in frame)
            for row in rows:
                self._produce(ctx, row, t, results)
        else:
            for row in rows:
                frame.append([t, self._arguments(row, t)])
                frame = frame[-(self._extent + 1) :]
                self._produce(ctx, row, t, self._fold(e[1] for e in frame))
        ctx.put_state(_FRAME, frame, ROWS)

    def _fold(self, arguments: Any) -> list[Any]:
        accumulator = self._aggregates.create()
        for values in arguments:
            accumulator = self._aggregates.add(accumulator, values)
        return self._aggregates.result(accumulator)

    def _produce(self, ctx: Context, row: dict[str, Any], t: int, results: Sequence[Any]) -> None:
        out = self._output(row, t, results)
        if out is not None:
            ctx.produce(self.output, self._key_of(ctx, out), ROWS.dumps(out), t)

    def _output(self, row: dict[str, Any], t: int, results: Sequence[Any]) -> dict[str, Any] | None:
        extended = dict(row)
        for i, value in enumerate(results):
            extended[over_column(i)] = value
        return self._row(extended, t)

    def _key_of(self, ctx: Context, out: dict[str, Any]) -> bytes:
        return ctx.key if self._key is None else group_key(self._key(out, 0), self._key_format)

    # -- an updating input, in the order of its ORDER BY values ------------------

    def _update(self, ctx: Context, record: Record, row: dict[str, Any]) -> None:
        op = row.pop(OP, None)
        if op not in ROW_KINDS:
            raise F.SqlRuntimeError(f"a row of an updating stream has {OP} {op!r}")
        t = record.event_time_ms
        [order] = self._order(row, t)
        if not isinstance(order, int | float) or isinstance(order, bool):
            raise F.SqlRuntimeError(f"OVER (ORDER BY ...): {order!r} is not a number")
        entries: list[list[Any]] = ctx.get_state(_ENTRIES, ROWS) or []
        entry = [order, canonical_text(row)]
        if op in RETRACTIONS:
            at = bisect.bisect_left(entries, entry)
            if at == len(entries) or entries[at] != entry:
                raise F.SqlRuntimeError(f"{op} of a row that was not written: {entry[1]}")
            lo, hi = self._affected(entries, order, at)
            changed = entries[:at] + entries[at + 1 :]
            before = self._outputs(entries, lo, hi, t)
            after = self._outputs(changed, lo, hi - 1, t)
        else:
            at = bisect.bisect_right(entries, entry)
            changed = [*entries[:at], entry, *entries[at:]]
            lo, hi = self._affected(changed, order, at)
            before = self._outputs(entries, lo, hi - 1, t)
            after = self._outputs(changed, lo, hi, t)
        entries = changed
        if entries:
            ctx.put_state(_ENTRIES, entries, ROWS)
        else:
            ctx.delete_state(_ENTRIES)
        taken, added = Counter(before), Counter(after)
        for changes, op in ((taken - added, "-D"), (added - taken, "+I")):
            for text in changes.elements():
                out = json.loads(text)
                out[OP] = op
                ctx.produce(self.output, self._key_of(ctx, out), ROWS.dumps(out), t)

    def _affected(self, entries: list[list[Any]], order: Any, at: int) -> tuple[int, int]:
        """The positions of ``entries`` (which hold the changed row, of ``order``, at
        ``at``) whose frames hold it: from its first peer (RANGE) or itself (ROWS) to
        the last row whose frame reaches back to it."""
        if self._unit == "rows":
            end = len(entries) if self._unbounded else min(len(entries), at + self._extent + 1)
            return at, end
        orders = [e[0] for e in entries]
        lo = bisect.bisect_left(orders, order)
        if self._unbounded:
            return lo, len(entries)
        return lo, bisect.bisect_right(orders, order + self._extent)

    def _outputs(self, entries: list[list[Any]], lo: int, hi: int, t: int) -> list[str]:
        """The output rows of positions ``lo`` to ``hi`` (exclusive), as text."""
        texts = []
        orders = [e[0] for e in entries] if self._unit == "range_ms" else []
        parsed: dict[int, dict[str, Any]] = {}

        def row(j: int) -> dict[str, Any]:
            if j not in parsed:
                parsed[j] = json.loads(entries[j][1])
            return parsed[j]

        running, folded = self._aggregates.create(), 0  # unbounded: frames only grow
        for i in range(lo, min(hi, len(entries))):
            if self._unit == "rows":
                first = 0 if self._unbounded else max(0, i - self._extent)
                last = i + 1
            else:
                order = entries[i][0]
                first = 0 if self._unbounded else bisect.bisect_left(orders, order - self._extent)
                last = bisect.bisect_right(orders, order)
            if self._unbounded:
                for j in range(folded, last):
                    running = self._aggregates.add(running, self._arguments(row(j), t))
                folded = last
                results = self._aggregates.result(running)
            else:
                results = self._fold(self._arguments(row(j), t) for j in range(first, last))
            out = self._output(row(i), t, results)
            if out is not None:
                texts.append(ROWS.dumps(out).decode())
        return texts
