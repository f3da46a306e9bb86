"""Sessionized clicks feeding a histogram of session lengths, exact through late data.

``python -m examples.session_histogram``: per-user sessions (``Sessions``, retracting)
feed a second ``WindowedAggregation`` that consumes their panes; clicks that arrive
late merge sessions, and the histogram still equals a plain-Python sessionization.
"""
