"""``run_backfill`` in a local[2] Spark session (slow): a corrupt log entry is reported,
not skipped, and the rest is backfilled; every key interval is one task, the largest
first; outputs come in production order; ids do not depend on the interval count and
the values equal an exact computation."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from millrace import spark_jobs
from millrace.computations import Topology
from millrace.spark_jobs.batch import (
    BackfillOptions,
    interval_ordered,
    largest_first,
    run_backfill,
    with_intervals,
)
from tests.spark_backfill._topologies import (
    local_backfill,
    log_records,
    two_stages,
    updates,
    write_log,
)
from tests.spark_logsource._logs import flip_byte_mid_file, segments
from tests.spark_logsource._session import shared_spark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_spark()


def test_a_corrupt_entry_is_reported_and_the_rest_backfilled(spark: Any, tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    write_log(log_dir, 1500, segment_bytes=25_000)
    sealed = [s for s in segments(log_dir, "events") if s.sealed]
    victim = Path(sealed[len(sealed) // 2].path)
    corrupt = flip_byte_mid_file(victim)
    rows = spark_jobs.read_log(spark, str(log_dir)).where("corrupt_reason IS NULL").collect()
    good = [(r.record_id, r.key, r.value, r.event_time_ms, r.stream) for r in rows]
    assert 0 < len(good) < 1500

    topology = with_intervals(two_stages(), 3)
    out = tmp_path / "out"
    summary = run_backfill(spark, BackfillOptions(topology=topology, log=str(log_dir),
                                                  out=str(out), partitions=2))  # fmt: skip
    assert summary.corrupt == [{"stream": "events", "segment": victim.name,
                                "corrupt_position": corrupt.position,
                                "corrupt_reason": corrupt.reason}]  # fmt: skip
    assert summary.records_read == len(good)
    good.sort(key=lambda r: r[3])
    expected = local_backfill(topology, good)["totals"]
    table = pq.read_table(out / "totals").to_pylist()
    assert {r["record_id"]: (r["key"], r["value"], r["event_time_ms"]) for r in table} == expected
    assert summary.outputs == {"totals": len(expected)}


@pytest.mark.parametrize(
    ("sizes", "known"), [([700, 300], True), ([10, 50, 30, 0, 20], True), ([5, 9, 1], False)]
)
def test_each_interval_is_one_partition_the_largest_first(
    spark: Any, sizes: list[int], known: bool
) -> None:
    from pyspark.sql import functions as fn

    rows = [(i, t) for i, size in enumerate(sizes) for t in range(size)]
    frame = spark.createDataFrame(rows, "interval int, event_time_ms long").select(
        "interval",
        (fn.lit(10_000) - fn.col("event_time_ms")).alias("event_time_ms"),
        fn.col("event_time_ms").cast("string").cast("binary").alias("record_id"),
        fn.lit(b"k").alias("key"),
        fn.lit(0).cast("long").alias("seq"),
    )
    given = dict(enumerate(sizes)) if known else None
    placed = interval_ordered(frame, len(sizes), sizes=given)
    assert placed.rdd.getNumPartitions() == len(sizes)
    got = placed.select(
        "interval", "event_time_ms", fn.spark_partition_id().alias("partition")
    ).collect()
    where = {r.interval: r.partition for r in got}
    assert len({(r.interval, r.partition) for r in got}) == len(where), "an interval is split"
    expected = largest_first(given or {}, len(sizes))
    assert where == {i: expected.index(i) for i in where}, "partition order: largest first"
    for interval in range(len(sizes)):
        times = [r.event_time_ms for r in got if r.interval == interval]
        assert times == sorted(times)


@pytest.mark.parametrize("intervals", [1, 3])
def test_outputs_come_in_production_order(spark: Any, tmp_path: Path, intervals: int) -> None:
    """An updating result whose updates of a key share event times: the last row per
    key of the output, and what the next stage saw last, are the key's final value
    (issue 31: outputs were sorted by event time and record id, so "latest row per
    key" could name an older update)."""
    log_dir = tmp_path / "log"
    write_log(log_dir, 1200)
    final: dict[bytes, int] = {}
    for _, key, value, _, _ in log_records(log_dir):
        final[key] = final.get(key, 0) + int(value)
    out = tmp_path / "out"
    run_backfill(spark, BackfillOptions(topology=with_intervals(updates(), intervals),
                                        log=str(log_dir), out=str(out), partitions=2,
                                        include_active=True))  # fmt: skip
    rows = pq.read_table(out / "sums").to_pylist()
    assert len(rows) == 1200
    last: dict[bytes, int] = {}
    seqs: dict[bytes, list[int]] = {}
    for row in rows:
        last[row["key"]] = int(row["value"])
        seqs.setdefault(row["key"], []).append(row["seq"])
    assert last == final
    assert all(s == sorted(s) and len(set(s)) == len(s) for s in seqs.values())
    finals = {r["key"]: int(r["value"]) for r in pq.read_table(out / "finals").to_pylist()}
    assert finals == final


SESSIONS_AND_WINDOWS = """
[streams.events]
[streams.sessions]
[streams.windows]

[computations.sessions]
handler = "millrace.dataflow:WindowedAggregation"
inputs = { events = "key" }
outputs = ["sessions"]
params = { window = "session:1500", aggregate = "count+sum", output = "sessions" }

[computations.windows]
handler = "millrace.dataflow:WindowedAggregation"
inputs = { events = "key" }
outputs = ["windows"]
params = { window = "tumbling:10000", aggregate = "count+sum", output = "windows" }
"""


def exact(records: list[tuple[bytes, bytes, bytes, int, str]]) -> dict[str, dict[Any, Any]]:
    """Sessions (gap 1,500 ms; Beam's rule: one gap apart do not merge) and 10-second
    windows per key, ``[count, sum]`` each, computed without Millrace."""
    per_key: dict[str, list[tuple[int, int]]] = {}
    windows: dict[tuple[str, int], list[int]] = {}
    for _, raw_key, raw_value, at, _ in records:
        per_key.setdefault(raw_key.decode(), []).append((at, int(raw_value)))
        acc = windows.setdefault((raw_key.decode(), at - at % 10_000), [0, 0])
        acc[0] += 1
        acc[1] += int(raw_value)
    sessions: dict[tuple[str, int, int], list[int]] = {}
    for key, items in per_key.items():
        items.sort()
        start = last = items[0][0]
        count = total = 0
        for ts, value in items:
            if ts >= last + 1_500:
                sessions[(key, start, last + 1_500)] = [count, total]
                start, count, total = ts, 0, 0
            last, count, total = ts, count + 1, total + value
        sessions[(key, start, last + 1_500)] = [count, total]
    return {"sessions": sessions, "windows": windows}


def test_backfill_ids_do_not_depend_on_intervals_and_equal_an_exact_computation(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 31: sessions (timers set inside batches, windows merging) and tumbling
    windows backfilled at 1, 2, 3 and 8 intervals: the same records under the same ids
    each time, and the values an exact computation gives."""
    log_dir = tmp_path / "log"
    write_log(log_dir, 3000)
    expected = exact(log_records(log_dir))
    topology = Topology.from_dict(tomllib.loads(SESSIONS_AND_WINDOWS))
    runs = []
    for intervals in (1, 2, 3, 8):
        out = tmp_path / f"out-{intervals}"
        run_backfill(spark, BackfillOptions(topology=topology, log=str(log_dir), out=str(out),
                                            intervals=intervals, include_active=True))  # fmt: skip
        runs.append({
            stream: sorted((r["record_id"], r["key"], r["value"], r["event_time_ms"])
                           for r in pq.read_table(out / stream).to_pylist())
            for stream in ("sessions", "windows")
        })  # fmt: skip
    assert all(run == runs[0] for run in runs[1:]), "ids and values independent of intervals"
    got: dict[str, dict[Any, Any]] = {"sessions": {}, "windows": {}}
    for stream, rows in runs[0].items():
        for *_, value, _ in rows:
            pane = json.loads(value)
            start, end = pane["window"]
            where = (pane["key"], start, end) if stream == "sessions" else (pane["key"], start)
            got[stream][where] = [pane["value"]["count"], pane["value"]["sum"]]
    assert got == expected
