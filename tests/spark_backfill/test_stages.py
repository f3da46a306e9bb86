"""The backfill's stages without Spark: equal, id for id, to the in-process online run,
whatever the batch size and the number of key intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.spark_jobs.batch import largest_first, with_intervals
from tests.spark_backfill._topologies import (
    harness_outputs,
    join_and_sessions,
    local_backfill,
    log_records,
    two_stages,
    write_log,
    write_orders,
)


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[bytes, bytes, bytes, int, str]]:
    log_dir = tmp_path_factory.mktemp("log")
    write_log(log_dir, 3000)
    return log_records(log_dir)


def as_tuples(outputs: dict) -> dict:  # type: ignore[type-arg]
    return {
        stream: {
            rid: (r.key, r.value, r.event_time_ms) if hasattr(r, "key") else r
            for rid, r in by_id.items()
        }
        for stream, by_id in outputs.items()
    }


@pytest.mark.parametrize(
    ("intervals", "batch_size"), [(None, 100), (1, 7), (2, 2000), (3, 1000), (8, 13)]
)
def test_stages_equal_the_online_run(
    records: list[tuple[bytes, bytes, bytes, int, str]], intervals: int | None, batch_size: int
) -> None:
    online = as_tuples(harness_outputs(two_stages(), records))
    assert len(online["totals"]) > 10
    batch = local_backfill(with_intervals(two_stages(), intervals), records, batch_size=batch_size)
    assert batch == online


def test_a_join_and_merging_sessions_equal_the_online_run(tmp_path: Path) -> None:
    """An interval join (full outer: unmatched rows at expiry) and session windows
    (merging) over two streams: the backfill equals the online run id for id."""
    write_orders(tmp_path, 600)
    records = sorted(
        log_records(tmp_path, "orders") + log_records(tmp_path, "shipments"),
        key=lambda r: r[3] // 400,  # the two streams interleaved as they were written, roughly
    )
    online = as_tuples(harness_outputs(join_and_sessions(), records, chunk=7))
    assert len(online["joined"]) > 100 and len(online["sessions"]) > 20
    assert online["late"] == {}, "no record is late online: the comparison needs that"
    for intervals, batch_size in ((1, 50), (2, 1000), (3, 7), (8, 2000)):
        topology = with_intervals(join_and_sessions(), intervals)
        assert local_backfill(topology, records, batch_size=batch_size) == online


def test_intervals_run_largest_first() -> None:
    assert largest_first({0: 50, 1: 30, 2: 20, 3: 10, 4: 10}, 5) == [0, 1, 2, 3, 4]
    assert largest_first({3: 7, 1: 9}, 4) == [1, 3, 0, 2]
    assert largest_first({}, 2) == [0, 1]
