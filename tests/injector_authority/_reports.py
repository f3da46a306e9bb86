"""The authority the tests of this folder drive, and its reports."""

from __future__ import annotations

from millrace.injector.watermark_authority import IntervalReport, WatermarkAuthority
from tests.workloads import two_stage_topology


def authority() -> WatermarkAuthority:
    """events -> counts (2 intervals) -> window_counts -> totals (2 intervals)."""
    return WatermarkAuthority(two_stage_topology(), clock=lambda: 42)


def rep(computation: str, index: int, work: int | None, epoch: int = 1) -> IntervalReport:
    return IntervalReport(computation, index, epoch, work)


def report_all(
    auth: WatermarkAuthority, counts: tuple[int | None, int | None], totals: tuple[int | None, ...]
) -> None:
    auth.report(
        [rep("counts", i, w) for i, w in enumerate(counts)]
        + [rep("totals", i, w) for i, w in enumerate(totals)]
    )
