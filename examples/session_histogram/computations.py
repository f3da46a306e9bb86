"""The two stages: clicks per user session, then sessions per length.

``SessionLengths`` emits a pane with a session's click count when the watermark
passes the session's end. A late click that joins a session, or bridges two into
one, retracts what was emitted for them before and emits the new count
(``Accumulation.RETRACTING``). ``LengthHistogram`` is keyed by that count (the
pane's ``value``): it adds each pane to its length's bucket and subtracts each
retraction, so every bucket holds exactly the sessions that exist now.
"""

from __future__ import annotations

from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    Count,
    EveryRecords,
    GlobalWindows,
    Sessions,
    WindowedAggregation,
)

MINUTE_MS = 60_000
GAP_MS = 5 * MINUTE_MS
"""Five minutes without a click end a session."""
ALLOWED_LATENESS_MS = 60 * MINUTE_MS
"""A click up to an hour behind the watermark still updates its session."""


class SessionLengths(WindowedAggregation):
    """Clicks per user session; merges and late clicks retract earlier panes."""

    window = Sessions(gap_ms=GAP_MS)
    aggregate = Count()
    allowed_lateness_ms = ALLOWED_LATENESS_MS
    accumulation = Accumulation.RETRACTING
    output = "session_lengths"
    late_output = "late_clicks"


class LengthHistogram(WindowedAggregation):
    """Sessions per length (keyed by the length), applying the retractions it reads: one
    window over all time, an updated bucket after every pane or retraction."""

    window = GlobalWindows()
    aggregate = Count()
    input_panes = True
    trigger = AfterWatermark(early=EveryRecords(1))
    accumulation = Accumulation.ACCUMULATING
    output = "histogram"
