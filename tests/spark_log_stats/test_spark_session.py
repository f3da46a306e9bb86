"""``log_stats.scan_with_spark``: the per-segment statistics Spark aggregates from the
``millrace`` data source, in a local[2] session shared with the data source tests (slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from millrace.injector.log import CorruptEntry, scan_segment
from millrace.spark_jobs import log_stats
from millrace.spark_jobs._log_reader import merge_streams
from millrace.spark_jobs.logsource import plan_segments
from tests.spark_log_stats._logs import flip_byte_mid_file, log_view, write_log
from tests.spark_logsource._session import shared_spark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_spark()


def test_segment_stats_match_each_segment_of_the_log(spark: Any, tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120, segment_bytes=4096)
    infos, records = log_view(tmp_path / "events", "events")
    _, parts = plan_segments(str(tmp_path), include_active=True)
    partials, tasks = log_stats.scan_with_spark(spark, str(tmp_path), parts, include_active=True)
    assert tasks == len(parts) == len(infos) >= 3
    for stats, info in zip(partials, infos, strict=True):
        held = [r for r in records if info.base_offset <= r.offset < info.end_offset]
        assert stats.corrupt is None and not stats.vanished
        assert (stats.path, stats.sealed) == (info.path, info.sealed)
        assert stats.records == info.records == len(held)
        assert (stats.first_offset, stats.last_offset) == (info.base_offset, info.end_offset - 1)
        assert (stats.min_event_ms, stats.max_event_ms) == (info.min_event_ms, info.max_event_ms)
        assert stats.min_ingest_ms == min(r.ingest_time_ms for r in held)
        assert stats.max_ingest_ms == max(r.ingest_time_ms for r in held)


def test_corrupt_and_vanished_segments(spark: Any, tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120, segment_bytes=4096)
    infos, _ = log_view(tmp_path / "events", "events")
    _, parts = plan_segments(str(tmp_path))
    victim = Path(infos[1].path)
    flip_byte_mid_file(victim)
    items = list(scan_segment(victim, "events"))
    corrupt = items[-1]
    assert isinstance(corrupt, CorruptEntry)
    Path(infos[0].path).unlink()  # retention ran between listing and reading

    partials, tasks = log_stats.scan_with_spark(spark, str(tmp_path), parts)
    assert tasks == len(parts) - 1  # the deleted segment was not there to plan
    assert partials[0].vanished and partials[0].records == 0
    assert partials[1].corrupt == corrupt
    assert partials[1].records == len(items) - 1 < infos[1].records
    merged = merge_streams(["events"], partials)["events"]
    assert merged.segments == len(parts) - 1
    assert merged.vanished == (Path(infos[0].path).name,)
    assert merged.records == sum(i.records for i in infos[2:] if i.sealed) + len(items) - 1
