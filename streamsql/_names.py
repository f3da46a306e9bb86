"""The names a plan gives the columns it adds to rows: a group's keys, an aggregate's
results (an OVER aggregate's too), a window's bounds, an updating row's kind, a Top-N's
rank. They begin with ``$`` (or are Flink's window names), so no table's column is
mistaken for one."""

from __future__ import annotations

WINDOW_NAMES = ("window_start", "window_end", "window_time")
OP = "$op"
"""The field of an updating stream's rows saying what each does (Flink's row kinds)."""
ROW_KINDS = ("+I", "-U", "+U", "-D")
RETRACTIONS = ("-U", "-D")
SCORE = "$score"
"""A Top-N's row's rank score (its ORDER BY value, negated when ascending)."""
ROW_NUMBER = "$rownum"
"""A Top-N's row's place in its partition, from 1 (``ROW_NUMBER()``)."""


def group_column(i: int) -> str:
    """The pane row's column of the group's ``i``-th key."""
    return f"$g{i}"


def aggregate_column(i: int) -> str:
    """The pane row's column of the ``i``-th aggregate's result."""
    return f"$agg{i}"


def aggregate_index(name: str) -> int | None:
    """``i`` when ``name`` is :func:`aggregate_column` ``(i)``."""
    digits = name.removeprefix("$agg")
    return int(digits) if digits != name and digits.isdigit() else None


def over_column(i: int) -> str:
    """An OVER aggregate's row's column of the ``i``-th aggregate's result."""
    return f"$over{i}"
