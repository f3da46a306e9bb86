"""The click-stream demo's computations, on the ``dataflow`` library.

``page_counts`` (keyed by page) needs no code: it is ``millrace.dataflow:WindowedAggregation``
with its settings as ``params`` in ``topology.toml`` (clicks per page in 1-minute
event-time windows, accumulating, a corrected pane for every straggler up to an hour
late).

``UserTopPages`` (keyed by user): each user's three most clicked pages over all time,
a ``TopK`` in the global window with a pane after every click, so the materialized
view of ``user_top_pages`` holds each user's current top pages.
"""

from __future__ import annotations

from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    EveryRecords,
    GlobalWindows,
    TopK,
    WindowedAggregation,
)


class UserTopPages(WindowedAggregation):
    """Per user, the three pages clicked most (ties: page name), after every click."""

    window = GlobalWindows()
    aggregate = TopK(k=3)  # exact counts: far fewer distinct pages than the sketch's counters
    field = "page"
    trigger = AfterWatermark(early=EveryRecords(1))
    accumulation = Accumulation.ACCUMULATING
    output = "user_top_pages"
