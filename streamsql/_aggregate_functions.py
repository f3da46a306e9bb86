"""SQL's aggregate functions as one combiner over a row's arguments (``COUNT``,
``COUNT(DISTINCT)``, ``SUM``, ``MIN``, ``MAX``, ``AVG``), with SQL's NULLs and, but for
``MIN`` and ``MAX``, retractions (an updating input's retracted rows taken back)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from millrace.dataflow import Combiner
from millrace.streamsql import _functions as F  # noqa: N812 - F. reads as SQL's functions

KINDS = ("count_star", "count", "count_distinct", "sum", "min", "max", "avg")
RETRACTABLE = frozenset({"count_star", "count", "count_distinct", "sum", "avg"})


class SqlAggregates(Combiner):
    """SQL's aggregate functions over one row's arguments each (a JSON array, one item
    per aggregate): ``count_star``, ``count``, ``count_distinct``, ``sum``, ``min``,
    ``max``, ``avg``; NULL arguments are skipped (``COUNT(*)`` counts every row), and an
    aggregate of no value is NULL (a count is 0)."""

    json_values = True
    numeric = False
    plain_accumulator = True

    def __init__(self, kinds: Sequence[str]) -> None:
        wrong = [k for k in kinds if k not in KINDS]
        if wrong or not kinds:
            raise ValueError(f"aggregates {list(kinds)!r}: each one of {', '.join(KINDS)}")
        self.kinds = tuple(kinds)
        self.retractable = all(k in RETRACTABLE for k in self.kinds)

    def checked(self, value: Any) -> Any:
        if not isinstance(value, list) or len(value) != len(self.kinds):
            raise ValueError(f"expected {len(self.kinds)} aggregate arguments, got {value!r}")
        return value

    def create(self) -> list[Any]:
        return [_EMPTY[k]() for k in self.kinds]

    def add(self, accumulator: list[Any], value: Any) -> list[Any]:
        return [_ADD[k](a, v, 1) for k, a, v in zip(self.kinds, accumulator, value, strict=True)]

    def retract(self, accumulator: list[Any], value: Any) -> list[Any]:
        return [_ADD[k](a, v, -1) for k, a, v in zip(self.kinds, accumulator, value, strict=True)]

    def merge(self, left: list[Any], right: list[Any]) -> list[Any]:
        return [_MERGE[k](a, b) for k, a, b in zip(self.kinds, left, right, strict=True)]

    def result(self, accumulator: list[Any]) -> list[Any]:
        return [_RESULT[k](a) for k, a in zip(self.kinds, accumulator, strict=True)]


def _count(a: int, v: Any, sign: int) -> int:
    return a if v is None else a + sign


def _sum(a: list[Any], v: Any, sign: int) -> list[Any]:
    """``[total, values]``: the total of the values present, and how many there are."""
    if v is None:
        return a
    return [a[0] + sign * F._number(v, "SUM"), a[1] + sign]


def _extreme(keep: Callable[[Any, Any], bool | None], what: str) -> Callable[[Any, Any, int], Any]:
    def fold(a: Any, v: Any, sign: int) -> Any:
        if sign < 0:
            raise ValueError(f"{what} cannot take back a retracted row")
        return v if a is None or (v is not None and keep(v, a)) else a

    return fold


def _distinct(a: dict[str, int], v: Any, sign: int) -> dict[str, int]:
    """Each distinct value's JSON text and how many rows hold it."""
    if v is not None:
        text = json.dumps(v, sort_keys=True)
        held = a.get(text, 0) + sign
        if held:
            a[text] = held
        else:
            a.pop(text, None)
    return a


def _merge_distinct(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    merged = dict(a)
    for text, held in b.items():
        merged[text] = merged.get(text, 0) + held
    return {t: n for t, n in merged.items() if n}


_Fold = Callable[[Any, Any, int], Any]
_EMPTY: dict[str, Callable[[], Any]] = {
    "count_star": lambda: 0, "count": lambda: 0, "count_distinct": dict,
    "sum": lambda: [0, 0], "min": lambda: None, "max": lambda: None, "avg": lambda: [0, 0],
}  # fmt: skip
_ADD: dict[str, _Fold] = {
    "count_star": lambda a, v, sign: a + sign,
    "count": _count,
    "count_distinct": _distinct,
    "sum": _sum,
    "min": _extreme(F.lt, "MIN"),
    "max": _extreme(F.gt, "MAX"),
    "avg": _sum,
}
_MERGE: dict[str, Callable[[Any, Any], Any]] = {
    "count_star": lambda a, b: a + b,
    "count": lambda a, b: a + b,
    "count_distinct": _merge_distinct,
    "sum": lambda a, b: [a[0] + b[0], a[1] + b[1]],
    "min": lambda a, b: _ADD["min"](a, b, 1),
    "max": lambda a, b: _ADD["max"](a, b, 1),
    "avg": lambda a, b: [a[0] + b[0], a[1] + b[1]],
}
_RESULT: dict[str, Callable[[Any], Any]] = {
    "count_star": lambda a: a,
    "count": lambda a: a,
    "count_distinct": len,
    "sum": lambda a: None if a[1] == 0 else a[0],
    "min": lambda a: a,
    "max": lambda a: a,
    "avg": lambda a: None if a[1] == 0 else a[0] / a[1],
}
