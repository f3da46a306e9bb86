"""The bounds of time: of watermarks and of the event times records may carry.

A leaf every layer checks against (the user API re-exports the bounds as
``computations.MIN_TIME`` ...): a client that validates event times (``millrace
inject``) imports this, not the user API or the engine.
"""

from __future__ import annotations

MIN_TIME = -(2**63)
"""No watermark yet: nothing is known to be complete."""
MAX_TIME = 2**63 - 1
"""Complete: no more records will arrive (a finished bounded input)."""

MIN_EVENT_TIME_MS = -62_135_596_800_000
"""The earliest event time a record, a production or a timer may carry: 0001-01-01T00:00Z."""
MAX_EVENT_TIME_MS = 253_402_300_799_999
"""The latest: 9999-12-31T23:59:59.999Z. Every path into Millrace refuses times outside
``[MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS]``, so watermark arithmetic (a bound subtracted,
idle time added) never leaves int64."""


def event_time_problem(event_time_ms: object) -> str | None:
    """Why ``event_time_ms`` is not an acceptable event time, or None when it is."""
    if not isinstance(event_time_ms, int) or isinstance(event_time_ms, bool):
        return f"event time {event_time_ms!r} is not integer milliseconds"
    if not MIN_EVENT_TIME_MS <= event_time_ms <= MAX_EVENT_TIME_MS:
        return (
            f"event time {event_time_ms} ms is outside the accepted range "
            f"{MIN_EVENT_TIME_MS}..{MAX_EVENT_TIME_MS} (years 1 to 9999)"
        )
    return None
