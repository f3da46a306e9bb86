"""Filters Spark pushes down, turned into what a reader can use: which segments, rows and kinds.

Spark hands :meth:`DataSourceReader.pushFilters` the conjuncts of a query's
``WHERE`` that are plain comparisons of a column with literals.
:func:`push_filters` keeps the ones this source applies exactly and returns
the rest to Spark. A kept filter must be applied *exactly as Spark would*,
NULLs included: a comparison with a NULL is not true, so ``offset >= 10``
also removes every corrupt row (its ``offset`` is NULL). That is why a
:class:`Pushdown` tracks the *kinds* of rows still wanted (records, corrupt
entries, vanished segments) next to the value ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

RECORD = "record"
CORRUPT = "corrupt"
VANISHED_ROW = "vanished"
ALL_KINDS = frozenset((RECORD, CORRUPT, VANISHED_ROW))

_SET_ON: dict[str, frozenset[str]] = {
    **{
        name: frozenset((RECORD,))
        for name in ("record_id", "key", "value", "event_time_ms", "ingest_time_ms", "offset")
    },
    "stream": ALL_KINDS,
    "segment": ALL_KINDS,
    "corrupt_position": frozenset((CORRUPT,)),
    "corrupt_reason": frozenset((CORRUPT, VANISHED_ROW)),
}
"""Column -> the kinds of rows on which it is not NULL."""

_RANGED = ("offset", "event_time_ms")
_NAMED = ("stream", "segment")


@dataclass(frozen=True, slots=True)
class Bounds:
    """The integers a column may take: ``low <= x <= high`` and, if ``values`` is set, in it."""

    low: int | None = None
    high: int | None = None
    values: frozenset[int] | None = None

    @property
    def unbounded(self) -> bool:
        """True if every integer passes."""
        return self.low is None and self.high is None and self.values is None

    def admits(self, value: int) -> bool:
        """Whether ``value`` passes."""
        if self.low is not None and value < self.low:
            return False
        if self.high is not None and value > self.high:
            return False
        return self.values is None or value in self.values

    def overlaps(self, low: int, high: int | None) -> bool:
        """Whether some integer of ``[low, high]`` passes (``high`` None: no upper end)."""
        if high is not None and low > high:
            return False
        lo = low if self.low is None else max(low, self.low)
        if high is None:
            hi = self.high
        else:
            hi = high if self.high is None else min(high, self.high)
        if hi is not None and lo > hi:
            return False
        if self.values is None:
            return True
        return any(lo <= v and (hi is None or v <= hi) for v in self.values)

    def narrowed(self, op: type[Filter], value: Any) -> Bounds:
        """These bounds and the comparison ``column <op> value``."""
        if op is GreaterThan:
            return self._at_least(value + 1)
        if op is GreaterThanOrEqual:
            return self._at_least(value)
        if op is LessThan:
            return self._at_most(value - 1)
        if op is LessThanOrEqual:
            return self._at_most(value)
        values = frozenset(value) if op is In else frozenset((value,))
        if self.values is not None:
            values &= self.values
        return replace(self, values=values)

    def _at_least(self, low: int) -> Bounds:
        return replace(self, low=low if self.low is None else max(self.low, low))

    def _at_most(self, high: int) -> Bounds:
        return replace(self, high=high if self.high is None else min(self.high, high))


@dataclass(frozen=True, slots=True)
class Pushdown:
    """The filters a reader applies itself: plain values, pickled with the reader.

    ``streams``/``segments`` None means any. ``kinds`` are the kinds of rows
    that can still pass (``record``, ``corrupt``, ``vanished``).
    """

    streams: frozenset[str] | None = None
    segments: frozenset[str] | None = None
    offset: Bounds = field(default_factory=Bounds)
    event_time: Bounds = field(default_factory=Bounds)
    kinds: frozenset[str] = ALL_KINDS

    @property
    def filters_records(self) -> bool:
        """True if some record rows may fail the offset or event-time bounds."""
        return not (self.offset.unbounded and self.event_time.unbounded)

    def keeps_stream(self, stream: str) -> bool:
        """Whether rows of ``stream`` can pass."""
        return self.streams is None or stream in self.streams

    def keeps_segment(self, stream: str, name: str) -> bool:
        """Whether rows of the segment file ``name`` of ``stream`` can pass."""
        return self.keeps_stream(stream) and (self.segments is None or name in self.segments)

    def keeps_offsets(self, base: int, end: int | None) -> bool:
        """Whether a segment holding offsets ``[base, end)`` (``end`` None: unknown) can give rows.

        Offsets only bound record rows, so this is only meaningful when
        ``kinds`` holds nothing else (always the case once ``offset`` is bounded).
        """
        if self.offset.unbounded:
            return True
        return self.offset.overlaps(base, None if end is None else end - 1)

    def keeps_event_times(self, records: int, low: int, high: int) -> bool:
        """Whether a segment of ``records`` records, event times ``[low, high]``, can give rows."""
        if self.event_time.unbounded:
            return True
        return records > 0 and self.event_time.overlaps(low, high)


def push_filters(pushdown: Pushdown, filters: Sequence[Filter]) -> tuple[Pushdown, list[Filter]]:
    """``pushdown`` with every filter of ``filters`` it can apply exactly; and the others.

    Applied exactly: ``=``, ``IN``, ``<``, ``<=``, ``>``, ``>=`` of ``offset``
    or ``event_time_ms`` with integers; ``=`` and ``IN`` of ``stream`` or
    ``segment`` with strings; ``IS NULL`` / ``IS NOT NULL`` of any column.
    Everything else (``NOT``, ``LIKE``, comparisons of other columns, other
    literal types) goes back to Spark, which then evaluates it on every row.
    """
    rest: list[Filter] = []
    for item in filters:
        pushed = _push_one(pushdown, item)
        if pushed is None:
            rest.append(item)
        else:
            pushdown = pushed
    return pushdown, rest


def _push_one(pushdown: Pushdown, item: Filter) -> Pushdown | None:
    attribute = getattr(item, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1 or attribute[0] not in _SET_ON:
        return None
    column: str = attribute[0]
    kinds = pushdown.kinds
    if isinstance(item, IsNotNull):
        return replace(pushdown, kinds=kinds & _SET_ON[column])
    if isinstance(item, IsNull):
        return replace(pushdown, kinds=kinds - _SET_ON[column])
    op = type(item)
    value: Any = getattr(item, "value", None)
    if column in _RANGED and op in _COMPARISONS and _all_ints(op, value):
        kinds &= _SET_ON[column]
        if column == "offset":
            return replace(pushdown, kinds=kinds, offset=pushdown.offset.narrowed(op, value))
        return replace(pushdown, kinds=kinds, event_time=pushdown.event_time.narrowed(op, value))
    if column in _NAMED and op in (EqualTo, In) and _all_strs(op, value):
        names: frozenset[str] = frozenset(value) if op is In else frozenset((value,))
        if column == "stream":
            current = pushdown.streams
            return replace(pushdown, streams=names if current is None else current & names)
        current = pushdown.segments
        return replace(pushdown, segments=names if current is None else current & names)
    return None


_COMPARISONS: tuple[type[Filter], ...] = (
    EqualTo,
    In,
    GreaterThan,
    GreaterThanOrEqual,
    LessThan,
    LessThanOrEqual,
)


def _literals(op: type[Filter], value: Any) -> Iterable[Any] | None:
    if op is In:
        return value if isinstance(value, tuple | list) else None
    return (value,)


def _all_ints(op: type[Filter], value: Any) -> bool:
    values = _literals(op, value)
    return values is not None and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )


def _all_strs(op: type[Filter], value: Any) -> bool:
    values = _literals(op, value)
    return values is not None and all(isinstance(v, str) for v in values)
