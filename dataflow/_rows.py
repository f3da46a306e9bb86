"""State kept one row per element (a buffered record, a version), read by time range.

A tag ``PREFIX<time>/...`` with the time as fixed-width hex from the earliest event
time sorts as the times do, so ``Context.scan_state(PREFIX, start=time_tag(a),
end=time_tag(b))`` reads the elements of ``[a, b)`` and nothing else.
"""

from __future__ import annotations

from millrace.computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS


def time_tag(t: int) -> str:
    """``t`` (clamped to the event-time range, one past its end allowed) as 16 hex
    digits counted from the earliest event time: tags sort as times do."""
    return f"{min(max(t, MIN_EVENT_TIME_MS), MAX_EVENT_TIME_MS + 1) - MIN_EVENT_TIME_MS:016x}"
