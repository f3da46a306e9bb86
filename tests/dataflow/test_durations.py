"""Durations in topology params: milliseconds, or a number with a unit (issue 36:
``tumbling:1m`` killed the node at start with a bare ValueError, and
``allowed_lateness_ms = "1h"`` failed with ``invalid literal for int()``)."""

from __future__ import annotations

import pytest

from millrace.dataflow import Dedup, Hopping, IntervalJoin, Tumbling, WindowedAggregation
from millrace.dataflow._durations import duration_ms
from millrace.dataflow._windows import parse_window


@pytest.mark.parametrize(
    ("text", "ms"),
    [(60_000, 60_000), ("60000", 60_000), ("500ms", 500), ("90s", 90_000), ("1m", 60_000),
     ("1h", 3_600_000), ("7d", 604_800_000), ("1.5s", 1_500), (" 2 m ", 120_000)],
)  # fmt: skip
def test_a_duration_is_milliseconds_or_a_number_with_a_unit(text: object, ms: int) -> None:
    assert duration_ms(text, "x") == ms


@pytest.mark.parametrize("text", ["1x", "soon", "", "1.0005s", True, 1.5, None, "m"])
def test_anything_else_is_an_error_naming_the_setting(text: object) -> None:
    with pytest.raises(ValueError, match=r"lateness .*: expected milliseconds or a duration"):
        duration_ms(text, "lateness")


def test_windows_and_lateness_take_durations() -> None:
    assert parse_window("tumbling:1m") == Tumbling(60_000)
    assert parse_window("hopping:1h:5m") == Hopping(3_600_000, 300_000)
    with pytest.raises(ValueError, match="window 'tumbling:1x'"):
        parse_window("tumbling:1x")
    aggregation = WindowedAggregation()
    aggregation.setup({"window": "tumbling:10s", "allowed_lateness_ms": "1h", "output": "o"})
    assert (aggregation.window, aggregation.allowed_lateness_ms) == (Tumbling(10_000), 3_600_000)
    join = IntervalJoin()
    join.setup({"left": "a", "right": "b", "output": "o", "lower_ms": "-5m", "upper_ms": "0"})
    assert (join.lower_ms, join.upper_ms) == (-300_000, 0)
    dedup = Dedup()
    dedup.setup({"output": "o", "within_ms": "10m"})
    assert dedup.within_ms == 600_000
