"""``Cumulating``: windows growing by a step from the start of each period (Flink's
CUMULATE), as an assigner and by name in a topology."""

from __future__ import annotations

import pytest

from millrace.dataflow import Cumulating, Window
from millrace.dataflow._windows import parse_window


def test_cumulating_windows_grow_by_their_step_from_each_periods_start() -> None:
    windows = Cumulating(size_ms=60_000, step_ms=20_000)
    assert windows.assign(0) == [Window(0, 20_000), Window(0, 40_000), Window(0, 60_000)]
    assert windows.assign(59_999) == [Window(0, 60_000)]
    assert windows.assign(65_000) == [
        Window(60_000, 80_000), Window(60_000, 100_000), Window(60_000, 120_000),
    ]  # fmt: skip
    assert windows.assign(-1) == [Window(-60_000, 0)]
    assert parse_window("cumulate:1m:20s") == windows
    for bad in ("cumulate:60000:7000", "cumulate:0:0"):
        with pytest.raises(ValueError, match="multiple of its step"):
            parse_window(bad)
