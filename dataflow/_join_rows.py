"""How an :class:`~dataflow._joins.IntervalJoin` keeps records in its key's state: one
row per buffered record (``L/<time>/<id>``, ``R/<time>/<id>``), the timer that frees
each, ``left_unique``'s copy of the key's left record, and the conversion, once, of
a key's records kept in the format before one row per record.
"""

from __future__ import annotations

from typing import Any

from millrace.computations import JSON, Context, Record
from millrace.dataflow._outputs import json_bytes
from millrace.dataflow._rows import time_tag


def entry_of(record: Record) -> dict[str, Any]:
    """A record as the join keeps it in a row (``m``: it has matched)."""
    return {
        "t": record.event_time_ms,
        "id": record.record_id.hex(),
        "v": json_bytes(record.value),
        "m": False,
    }


def element_tag(side: str, t: int, rid: str) -> str:
    """Where one buffered record of ``side`` lives: one state row per record."""
    return f"{side}/{time_tag(t)}/{rid}"


def expiry_tag(side: str, t: int, rid: str) -> str:
    """The timer that frees one buffered record of ``side``."""
    return f"x:{side}:{time_tag(t)}:{rid}"


UNIQUE_LEFT = "L@"
"""``left_unique``: a copy of the key's left record's row, found by name (a state read
through the cache instead of a prefix scan). Written with the row, deleted when the
row expires whatever the setting, so it is never stale; a row kept without it (by a
join without ``left_unique``, or before it) is found by a scan and given one."""


def unique_left(ctx: Context) -> dict[str, Any] | None:
    """``left_unique``: the key's left record's entry (its row's tag is
    :func:`element_tag` of it), or None."""
    entry = ctx.get_state(UNIQUE_LEFT, JSON)
    if entry is not None:  # written after the key's old-format lists were converted
        return entry  # type: ignore[no-any-return]
    migrate(ctx, "L")
    rows = ctx.scan_state("L/", JSON, limit=1)
    if not rows:
        return None
    ctx.put_state(UNIQUE_LEFT, rows[0][1], JSON)
    return rows[0][1]  # type: ignore[no-any-return]


def forget_unique_left(ctx: Context, entry: dict[str, Any]) -> None:
    kept = ctx.get_state(UNIQUE_LEFT, JSON)
    if kept is not None and (kept["t"], kept["id"]) == (entry["t"], entry["id"]):
        ctx.delete_state(UNIQUE_LEFT)


def migrate(ctx: Context, sides: str) -> None:
    """A key's ``sides`` kept as one JSON list each (the format before one row per
    record) become one row per record, once. A record converts the side it reads; a
    side's own list waits for the first record or timer that reads it."""
    for side in sides:
        entries = ctx.get_state(side, JSON)
        if entries is not None:
            for entry in entries:
                ctx.put_state(element_tag(side, entry["t"], entry["id"]), entry, JSON)
            ctx.delete_state(side)
