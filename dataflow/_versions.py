"""A table key's versions, for the event-time versioned stream-table join.

A version is ``{"t": ms, "row": row}`` or, for a delete, ``{"t": ms, "deleted":
true}``; the join keeps one state row per version (``_stream_table.py``).
"""

from __future__ import annotations

from typing import Any

Version = dict[str, Any]


def row_of(version: Version | None) -> tuple[bool, Any]:
    """``(found, row)`` of a looked-up version: not found when there is none or it is a
    deletion."""
    if version is None or version.get("deleted"):
        return False, None
    return True, version["row"]
