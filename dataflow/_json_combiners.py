"""Combiners over any JSON value: the records (or panes) with the highest or lowest
score, the top ``n``, or all of them.

They compose in stages: count per auction in one aggregation, then, keyed by window
(``json:window``), :class:`TopN` or :class:`MaxBy` over those panes gives the
auctions with the highest count, ties included. Their results do not depend on the
order records arrive in (a stream equals its backfill): items with the same score are
ordered by their canonical JSON text, and without ``ties`` the first of them in that
order is kept.
"""

from __future__ import annotations

import heapq
import json
import math
from itertools import chain
from typing import Any

from millrace.dataflow._combiners import Combiner


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Scored(Combiner):
    """What the scored combiners share: reading an item's score."""

    json_values = True
    numeric = False
    plain_accumulator = True

    def __init__(self, by: str | None = None) -> None:
        self.by = by
        """The field of each value holding its score (None: the value is the score)."""

    def score(self, value: Any) -> float:
        """``value``'s score: a finite number (``ValueError`` otherwise)."""
        by = self.by  # the common cases first, checked cheaply
        found = value if by is None else value.get(by) if type(value) is dict else None
        if type(found) is int or (type(found) is float and math.isfinite(found)):
            return found
        return self._checked_score(value)

    def _checked_score(self, value: Any) -> float:
        found = value
        if self.by is not None:
            if not isinstance(value, dict) or self.by not in value:
                raise ValueError(f"cannot score {value!r}: no field {self.by!r}")
            found = value[self.by]
        if isinstance(found, bool) or not isinstance(found, int | float):
            raise ValueError(f"cannot score {value!r}: {found!r} is not a number")
        if not math.isfinite(found):
            raise ValueError(f"cannot score {value!r}: {found!r} is not finite")
        return found

    def checked(self, value: Any) -> Any:
        self.score(value)
        return value

    def _rank(self, value: Any) -> float:
        """Lower is better: the negated score (the score itself when ``lowest_first``)."""
        return self.score(value) if self.lowest_first else -self.score(value)

    def _ranks(self, values: list[Any]) -> list[float]:
        """``[self._rank(value) for value in values]``, with no call per value when
        every score is an int (the common case)."""
        by = self.by
        try:
            scores = [value[by] for value in values] if by is not None else values
            plain = all(type(score) is int for score in scores)
        except (KeyError, TypeError, IndexError):
            plain = False
        if not plain:
            return [self._rank(value) for value in values]  # checks each, raises
        return list(scores) if self.lowest_first else [-score for score in scores]

    lowest_first = False
    """True when the lowest score is the best (:class:`MinBy`)."""

    def _order(self, value: Any) -> tuple[float, str]:
        """Best first: the better rank, then the canonical JSON text."""
        return self._rank(value), _canonical(value)


class TopN(_Scored):
    """The ``n`` values with the highest score (``by``: the field holding it), best
    first; with ``ties`` every value scoring as the ``n``-th one is kept too (Nexmark
    q5's "the auctions with the most bids"). ``TopN(1, by)`` is an arg-max."""

    def __init__(self, n: int, by: str | None = None, *, ties: bool = True) -> None:
        if n < 1:
            raise ValueError(f"TopN needs n >= 1, not {n}")
        super().__init__(by)
        self.n = n
        self.ties = ties

    def create(self) -> list[Any]:
        return []

    def add(self, accumulator: list[Any], value: Any) -> list[Any]:
        rank = self._rank(value)
        if len(accumulator) >= self.n and rank > self._rank(accumulator[-1]):
            return accumulator  # worse than all kept (most values): nothing to sort
        if self.n == 1 and accumulator and rank < self._rank(accumulator[0]):
            return [value]  # better than the kept ones (tied with each other): alone
        return self._trim([*accumulator, value])

    def add_all(self, accumulator: list[Any], values: list[Any]) -> list[Any]:
        """As :meth:`add` one by one, ranking each value once: only values ranked within
        the ``n`` best of all (ties included) are sorted."""
        if not values:
            return accumulator
        ranks = self._ranks(values)
        kept_ranks = [self._rank(value) for value in accumulator]
        limit = heapq.nsmallest(self.n, chain(kept_ranks, ranks))[-1]
        best = [value for value, rank in zip(values, ranks, strict=True) if rank <= limit]
        kept = [value for value, rank in zip(accumulator, kept_ranks, strict=True) if rank <= limit]
        return self._trim([*kept, *best])

    def merge(self, left: list[Any], right: list[Any]) -> list[Any]:
        return self._trim([*left, *right])

    def _trim(self, items: list[Any]) -> list[Any]:
        items.sort(key=self._order)
        if len(items) <= self.n:
            return items
        if not self.ties:
            return items[: self.n]
        last = self.score(items[self.n - 1])
        keep = self.n
        while keep < len(items) and self.score(items[keep]) == last:
            keep += 1
        return items[:keep]


class MaxBy(TopN):
    """The values with the highest score (``by``), ties included (a list, best first in
    canonical order); without ``ties``, one value."""

    def __init__(self, by: str | None = None, *, ties: bool = True) -> None:
        super().__init__(1, by, ties=ties)

    def result(self, accumulator: list[Any]) -> Any:
        return accumulator if self.ties else (accumulator[0] if accumulator else None)


class MinBy(MaxBy):
    """The values with the lowest score (``by``), ties included; without ``ties``, one."""

    lowest_first = True


class Collect(Combiner):
    """Every value, as a list in canonical JSON order (so the same for any arrival
    order). Keeps all of them in the window's state: for small groups."""

    json_values = True
    numeric = False
    plain_accumulator = True

    def create(self) -> list[Any]:
        return []

    def add(self, accumulator: list[Any], value: Any) -> list[Any]:
        return sorted([*accumulator, value], key=_canonical)

    def merge(self, left: list[Any], right: list[Any]) -> list[Any]:
        return sorted([*left, *right], key=_canonical)
