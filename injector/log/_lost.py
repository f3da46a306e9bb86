"""Offsets a stream's log lost and the operator accepted as lost (``lost.json``).

When the log's tail is gone (a disk fault) below offsets a consumer acknowledged, the
injector refuses to start: numbering new records from the log's end would give them
the ids of records the nodes remember, and they would be dropped as duplicates. Without
a backup to restore, ``millrace log accept-loss`` records the range here and the log
continues above it (:meth:`StreamLog.skip_lost`), so no record id is reused. Segments
may then have a gap, exactly at a recorded range; any other gap is corruption.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from millrace.deployment import write_json_durably

LOST_FILE = "lost.json"


@dataclass(frozen=True, slots=True)
class LostRange:
    """Offsets ``first .. end - 1`` are lost; accepted at ``recorded_ms``."""

    first: int
    end: int
    recorded_ms: int

    @property
    def records(self) -> int:
        return self.end - self.first


def read_lost(directory: Path) -> tuple[LostRange, ...]:
    """The ranges recorded for the log in ``directory``, oldest first."""
    try:
        body = json.loads((directory / LOST_FILE).read_text())
    except FileNotFoundError:
        return ()
    return tuple(
        LostRange(int(entry["from"]), int(entry["to"]), int(entry["recorded_ms"]))
        for entry in body["lost"]
    )


def record_lost(directory: Path, lost: LostRange) -> tuple[LostRange, ...]:
    """Add ``lost`` to the ranges of ``directory`` (durably); all the ranges."""
    ranges = (*read_lost(directory), lost)
    entries = [{"from": r.first, "to": r.end, "recorded_ms": r.recorded_ms} for r in ranges]
    write_json_durably(directory / LOST_FILE, {"lost": entries})
    return ranges


def lost_gap(ranges: tuple[LostRange, ...], first: int, end: int) -> bool:
    """Whether offsets ``first .. end - 1`` are a recorded loss."""
    return any(r.first == first and r.end == end for r in ranges)


def past_loss(ranges: tuple[LostRange, ...], offset: int) -> int:
    """Where the log continues after ``offset``, its end: past a loss recorded from it."""
    for lost in ranges:
        if lost.first == offset:
            return lost.end
    return offset
