"""When a window emits a pane, and what a pane after the first holds.

:class:`AfterWatermark` is the Dataflow model's default trigger: one
*on-time* pane when the watermark passes the window's end; optionally
*early* panes before it (every N records, or every D of processing time)
and *late* panes after it for records that arrive within the allowed
lateness (one per late record, or one batched pane when the window
expires).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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
    """An early pane every ``count`` records (before the watermark passes the end)."""

    count: int

    def __post_init__(self) -> None:
        if self.count <= 0:
            raise ValueError(f"EveryRecords needs count > 0, not {self.count}")


@dataclass(frozen=True, slots=True)
class EveryProcessingTime:
    """An early pane ``interval_ms`` of processing time after the first record since the
    previous pane (before the watermark passes the end): a processing-time timer."""

    interval_ms: int

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"EveryProcessingTime needs interval_ms > 0, not {self.interval_ms}")


@dataclass(frozen=True, slots=True)
class EachLateRecord:
    """A late pane for every record that arrives after the on-time pane (within the
    allowed lateness): the default, as in Beam."""


@dataclass(frozen=True, slots=True)
class AtExpiry:
    """One late pane with every late record, when the window expires (the watermark
    passes its end plus the allowed lateness)."""


@dataclass(frozen=True, slots=True)
class AfterWatermark:
    """On time when the watermark passes the window's end; ``early`` and ``late``
    firings around it."""

    early: EveryRecords | EveryProcessingTime | None = None
    late: EachLateRecord | AtExpiry = EachLateRecord()
