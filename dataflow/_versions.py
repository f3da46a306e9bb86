"""A table key's version history, for the event-time versioned stream-table join.

A history is a JSON list of versions sorted by event time, each
``{"t": ms, "row": row}`` or, for a delete, ``{"t": ms, "deleted": true}``;
at most one version per event time. Plain functions on plain lists, so the
join's state stays readable with ``millrace state get`` and the rules below
are testable without an engine.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

Version = dict[str, Any]


def insert(history: list[Version], t: int, deleted: bool, row: Any) -> list[Version]:
    """``history`` with the change at ``t`` in place. A change at the event time of an
    existing version replaces it: of two changes at one instant, the later to arrive
    wins (as in a Kafka Streams versioned store)."""
    version: Version = {"t": t, "deleted": True} if deleted else {"t": t, "row": row}
    times = [v["t"] for v in history]
    at = bisect_right(times, t)
    if at and times[at - 1] == t:
        return [*history[: at - 1], version, *history[at:]]
    return [*history[:at], version, *history[at:]]


def as_of(history: list[Version], t: int) -> Version | None:
    """The version in force at ``t``: the one with the greatest event time ``<= t``
    (None if there is none; a deletion is returned as such)."""
    at = bisect_right([v["t"] for v in history], t)
    return history[at - 1] if at else None


def prune(history: list[Version], horizon: int) -> list[Version]:
    """``history`` without what no lookup at ``horizon`` or later can meet: every
    version before the one in force at ``horizon``, and that one too if it is a
    deletion (meeting it is meeting nothing). Only sound when no change older than
    ``horizon`` will be inserted any more."""
    at = bisect_right([v["t"] for v in history], horizon)
    if not at:
        return history
    floor = history[at - 1]
    return history[at:] if floor.get("deleted") else history[at - 1 :]


def row_of(version: Version | None) -> tuple[bool, Any]:
    """``(found, row)`` of a looked-up version: not found when there is none or it is a
    deletion."""
    if version is None or version.get("deleted"):
        return False, None
    return True, version["row"]
