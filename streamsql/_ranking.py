"""The computation of a Top-N over no window: ``ROW_NUMBER() OVER (PARTITION BY k
ORDER BY x DESC) AS rownum`` in a subquery and ``WHERE rownum <= N`` around it, over an
append-only input (Flink's Top-N; with ``N = 1``, its deduplication).

Per partition (the record's key) the ``N`` best rows so far are kept, ordered by the
``ORDER BY`` value and then by the rows' canonical JSON text (so a backfill ranks ties
as the online run does). A row that enters them changes the ranking: the rows whose
rank changed are taken back (``-D``) and written again with their new rank (``+I``);
an updating result, like an unwindowed ``GROUP BY``'s.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from millrace.computations import Computation, Context, Record
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions
from millrace.streamsql._expressions import compile_values
from millrace.streamsql._names import OP, ROW_NUMBER
from millrace.streamsql._rows import ROWS, canonical_text, library_settings, row_of, strings_param

_TOP = "top"
"""A partition's best rows: ``[[rank score, row text], ...]``, best first."""


class SqlRanking(Computation):
    """The ``top_n`` best rows of each partition by ``order`` (SQL over the row;
    ``descending``: largest first), each written with its rank in ``$rownum`` and
    what it does in ``$op``."""

    SETTINGS = frozenset({"output", "top_n", "order", "descending"})

    def setup(self, params: Mapping[str, Any]) -> None:
        """Read and compile ``params``."""
        library_settings(self, params, frozenset())
        self.output = str(params.get("output", ""))
        if not self.output:
            raise ValueError("SqlRanking needs an output stream (output = ...)")
        n = params.get("top_n")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"top_n {n!r}: expected a number of rows, at least 1")
        self._n = n
        [order] = strings_param(params, "order") or ["NULL"]
        self._order = compile_values([order])
        self._sign = -1 if params.get("descending") is True else 1

    def process_record(self, ctx: Context, record: Record) -> None:
        row = row_of(record)
        if OP in row:
            raise F.SqlRuntimeError("ROW_NUMBER() over no window reads an append-only input")
        t = record.event_time_ms
        [value] = self._order(row, t)
        entry = [self._sign * F._number(value, "ORDER BY"), canonical_text(row)]
        top: list[list[Any]] = ctx.get_state(_TOP, ROWS) or []
        at = bisect.bisect_right(top, entry)
        if at >= self._n:
            return  # not among the best: nothing changes
        ranked = [*top[:at], entry, *top[at:]][: self._n]
        ctx.put_state(_TOP, ranked, ROWS)
        before, after = Counter(_ranked(top[at:], at)), Counter(_ranked(ranked[at:], at))
        for changes, op in ((before - after, "-D"), (after - before, "+I")):
            for text in changes.elements():
                out = json.loads(text)
                out[OP] = op
                ctx.produce(self.output, ctx.key, ROWS.dumps(out), t)


def _ranked(entries: list[list[Any]], first: int) -> list[str]:
    """The rows of ``entries`` (ranked from ``first`` + 1) with their ranks, as text."""
    out = []
    for i, (_, text) in enumerate(entries):
        row = json.loads(text)
        row[ROW_NUMBER] = first + i + 1
        out.append(canonical_text(row))
    return out
