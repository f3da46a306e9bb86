"""When a window emits a pane, and what a pane after the first holds.

:class:`AfterWatermark` is the Dataflow model's default trigger: one
*on-time* pane when the watermark passes the window's end; optionally
*early* panes before it and *late* panes after it for records that arrive
within the allowed lateness. Early and late panes fire on a condition: every
N records (:class:`EveryRecords`), D of processing time after the first
record since the previous pane (:class:`EveryProcessingTime`), or whichever
of several comes first (:class:`FirstOf`, Beam's ``AfterFirst``). Late
records that no condition has emitted yet are flushed in one last late pane
when the window expires (Beam's ``FIRE_IF_NON_EMPTY``), so none is lost;
:class:`AtExpiry` is that pane alone, :class:`EachLateRecord` (the default)
one pane per late record.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from millrace.dataflow._durations import duration_ms


class Accumulation(Enum):
    """What the panes after the first hold."""

    DISCARDING = "discarding"
    """Only what arrived since the previous pane (pane values add up to the total)."""
    ACCUMULATING = "accumulating"
    """Everything so far (the last pane is the total)."""
    RETRACTING = "retracting"
    """Everything so far, each pane preceded by a retraction of the previous one, so a
    downstream aggregation that subtracts retractions stays exact."""


@dataclass(frozen=True, slots=True)
class EveryRecords:
    """A pane every ``count`` records since the previous pane (early: before the
    watermark passes the end; late: after it)."""

    count: int

    def __post_init__(self) -> None:
        if self.count <= 0:
            raise ValueError(f"EveryRecords needs count > 0, not {self.count}")


@dataclass(frozen=True, slots=True)
class EveryProcessingTime:
    """A pane ``interval_ms`` of processing time after the first record since the
    previous pane (early or late): a processing-time timer."""

    interval_ms: int

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"EveryProcessingTime needs interval_ms > 0, not {self.interval_ms}")


@dataclass(frozen=True, slots=True, init=False)
class FirstOf:
    """A pane when any of ``conditions`` holds, e.g. ``FirstOf(EveryRecords(100),
    EveryProcessingTime(60_000))``: after 100 records or a minute, whichever comes first;
    either firing starts both over (Beam's ``AfterFirst``, Flink's ``Or``)."""

    conditions: tuple[Condition, ...]

    def __init__(self, *conditions: Condition) -> None:
        if not conditions:
            raise ValueError("FirstOf needs at least one condition")
        for condition in conditions:
            if not isinstance(condition, EveryRecords | EveryProcessingTime | FirstOf):
                raise TypeError(
                    f"FirstOf takes EveryRecords, EveryProcessingTime or FirstOf, not {condition!r}"
                )
        object.__setattr__(self, "conditions", conditions)

    def __repr__(self) -> str:
        return f"FirstOf({', '.join(map(repr, self.conditions))})"


Condition = EveryRecords | EveryProcessingTime | FirstOf
"""When an early (or batched late) pane fires."""


@dataclass(frozen=True, slots=True)
class EachLateRecord:
    """A late pane for every record that arrives after the on-time pane (within the
    allowed lateness): the default, as in Beam; the same as ``EveryRecords(1)``."""


@dataclass(frozen=True, slots=True)
class AtExpiry:
    """One late pane with every late record, when the window expires (the watermark
    passes its end plus the allowed lateness)."""


LateCondition = Condition | EachLateRecord | AtExpiry
"""When a late pane fires (besides the flush at expiry of late records not yet emitted)."""


@dataclass(frozen=True, slots=True)
class Firing:
    """A condition as the aggregation checks it: a pane once ``count`` records arrived
    since the previous one, or ``interval_ms`` of processing time after the first of
    them (None: not by that measure)."""

    count: int | None = None
    interval_ms: int | None = None


@functools.cache
def firing(condition: LateCondition | None) -> Firing:
    """``condition`` as the smallest count and interval that fire it."""
    if condition is None or isinstance(condition, AtExpiry):
        return Firing()
    if isinstance(condition, EachLateRecord):
        return Firing(count=1)
    if isinstance(condition, EveryRecords):
        return Firing(count=condition.count)
    if isinstance(condition, EveryProcessingTime):
        return Firing(interval_ms=condition.interval_ms)
    parts = [firing(part) for part in condition.conditions]
    counts = [p.count for p in parts if p.count is not None]
    intervals = [p.interval_ms for p in parts if p.interval_ms is not None]
    return Firing(min(counts, default=None), min(intervals, default=None))


@dataclass(frozen=True, slots=True)
class AfterWatermark:
    """On time when the watermark passes the window's end; ``early`` and ``late``
    firings around it."""

    early: Condition | None = None
    late: LateCondition = EachLateRecord()

    def __post_init__(self) -> None:
        if not isinstance(self.early, Condition | None):
            raise TypeError(
                f"early: EveryRecords, EveryProcessingTime, FirstOf or None, not {self.early!r}"
            )
        if not isinstance(self.late, LateCondition):
            raise TypeError(
                "late: EachLateRecord, AtExpiry, EveryRecords, EveryProcessingTime or "
                f"FirstOf, not {self.late!r}"
            )


def parse_trigger(params: Mapping[str, Any]) -> AfterWatermark:
    """The trigger from topology ``params``: ``early_every_records`` and
    ``early_every_ms`` (0: not by that measure; both: whichever first), and either
    ``late`` (``each`` or ``at_expiry``) or ``late_every_records`` and ``late_every_ms``
    (batched late panes, the rest flushed when the window expires)."""
    early = _condition(params, "early")
    late: LateCondition | None = _condition(params, "late")
    if late is not None and "late" in params:
        raise ValueError("late and late_every_records / late_every_ms: choose one")
    if late is None:
        named: dict[str, LateCondition] = {"each": EachLateRecord(), "at_expiry": AtExpiry()}
        spec = str(params.get("late", "each"))
        if spec not in named:
            raise ValueError(f"late {spec!r}: expected each or at_expiry")
        late = named[spec]
    return AfterWatermark(early=early, late=late)


def _condition(params: Mapping[str, Any], phase: str) -> Condition | None:
    records = int(params.get(f"{phase}_every_records", 0))
    interval_ms = duration_ms(params.get(f"{phase}_every_ms", 0), f"{phase}_every_ms")
    conditions: list[Condition] = []
    if records:
        conditions.append(EveryRecords(records))
    if interval_ms:
        conditions.append(EveryProcessingTime(interval_ms))
    if len(conditions) > 1:
        return FirstOf(*conditions)
    return conditions[0] if conditions else None
