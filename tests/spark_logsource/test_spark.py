"""``spark.read.format("millrace")`` in a local[2] Spark session (slow): the log's records,
pushdown with fewer partitions, corrupt rows and ``corrupt=fail``, archives, errors.

Every query plans in a fresh Python worker and every partition is a task: the tests
keep both few (the pure halves are in ``test_plan.py`` and ``test_read.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from millrace import spark_jobs
from millrace.injector.log import AppendRequest, LogConfig, LogRecord, StreamLog, scan_segment
from tests.spark_logsource._logs import (
    Row,
    archive,
    as_row,
    flip_byte_mid_file,
    oracle,
    segments,
    write_logs,
)
from tests.spark_logsource._session import shared_spark

pytestmark = pytest.mark.slow

COLUMNS = (
    "record_id", "key", "value", "event_time_ms", "ingest_time_ms", "stream", "offset",
)  # fmt: skip
CORRUPT_COLUMNS = ("segment", "corrupt_position", "corrupt_reason")


@pytest.fixture(scope="module")
def spark() -> Any:
    return shared_spark()


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("log")
    write_logs(root, segment_bytes=8192)
    return root


def collect(df: Any) -> tuple[list[Row], list[dict[str, Any]]]:
    """The record rows of a DataFrame, in (stream, offset) order, and the other rows."""
    rows = [row.asDict() for row in df.collect()]
    good = [tuple(r[c] for c in COLUMNS) for r in rows if r["corrupt_reason"] is None]
    assert all(r["corrupt_position"] is None for r in rows if r["corrupt_reason"] is None)
    return (
        sorted(good, key=lambda r: (r[5], r[6])),
        [r for r in rows if r["corrupt_reason"] is not None],
    )


def expected(log_dir: Path) -> list[Row]:
    return [row for stream in ("clicks", "views") for row in oracle(log_dir, stream)]


def sealed_count(log_dir: Path) -> int:
    return sum(1 for s in ("clicks", "views") for i in segments(log_dir, s) if i.sealed)


def test_the_dataframe_holds_the_logs_records(spark: Any, log_dir: Path) -> None:
    df = spark.read.format("millrace").load(str(log_dir))
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("record_id", "binary"), ("key", "binary"), ("value", "binary"),
        ("event_time_ms", "bigint"), ("ingest_time_ms", "bigint"), ("stream", "string"),
        ("offset", "bigint"), ("segment", "string"), ("corrupt_position", "bigint"),
        ("corrupt_reason", "string"),
    ]  # fmt: skip
    assert df.rdd.getNumPartitions() == sealed_count(log_dir) >= 6  # one per segment file
    assert collect(df) == (expected(log_dir), [])


def test_filters_skip_segments_and_rows(spark: Any, log_dir: Path) -> None:
    df = spark_jobs.read_log(spark, str(log_dir))
    everything = expected(log_dir)
    low_event = everything[40][3]
    query = (
        "stream = 'clicks' AND offset >= 100 AND offset < 400 "
        f"AND event_time_ms BETWEEN {low_event} AND {low_event + 60_000} "
        "AND ingest_time_ms > 0"  # handed back to Spark
    )
    filtered = df.where(query)
    assert collect(filtered) == (
        [
            r
            for r in everything
            if r[5] == "clicks" and 100 <= r[6] < 400 and low_event <= r[3] <= low_event + 60_000
        ],
        [],
    )
    assert 0 < filtered.rdd.getNumPartitions() < sealed_count(log_dir)
    # The same DataFrame, unfiltered again, is planned afresh.
    assert df.count() == len(everything)


@pytest.mark.xfail(
    strict=True,
    reason="Spark 4.3.0 keeps the read planned by the last filter pushdown on the shared "
    "PythonDataSourceV2 and reuses it for a later query that pushes no filter "
    "(spark_jobs.read_log works around it; docs/spark.md)",
)
def test_spark_reuses_a_pushed_down_plan_without_read_log(spark: Any, log_dir: Path) -> None:
    df = spark.read.format("millrace").load(str(log_dir))
    assert df.where("offset < 10").count() == 20  # 10 per stream
    assert df.count() == len(expected(log_dir))


def test_corrupt_entries_are_rows_or_failures(spark: Any, log_dir: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "log"
    shutil.copytree(log_dir, damaged)
    info = next(i for i in segments(damaged, "clicks")[1:] if i.sealed)
    victim = Path(info.path)
    before = expected(damaged)
    corrupt = flip_byte_mid_file(victim)
    survivors = [
        as_row("clicks", r) for r in scan_segment(victim, "clicks") if isinstance(r, LogRecord)
    ]
    assert 0 < len(survivors) < info.records
    lost = {r[6] for r in before if r[5] == "clicks" and info.base_offset <= r[6] < info.end_offset}
    lost -= {r[6] for r in survivors}

    good, bad = collect(spark_jobs.read_log(spark, str(damaged)))
    assert good == [r for r in before if not (r[5] == "clicks" and r[6] in lost)]
    assert bad == [
        {
            "record_id": None, "key": None, "value": None, "event_time_ms": None,
            "ingest_time_ms": None, "stream": "clicks", "offset": None, "segment": victim.name,
            "corrupt_position": corrupt.position, "corrupt_reason": corrupt.reason,
        }
    ]  # fmt: skip
    with pytest.raises(Exception, match=f"corrupt entry in stream 'clicks' segment {victim.name}"):
        spark_jobs.read_log(spark, str(damaged), corrupt="fail").count()


def test_an_archive_uri_reads_like_the_log_directory(
    spark: Any, log_dir: Path, tmp_path: Path
) -> None:
    uri = archive(log_dir, tmp_path / "archive")
    assert uri.startswith("file:///")
    assert collect(spark_jobs.read_log(spark, uri)) == (expected(log_dir), [])


def test_a_missing_path_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"no log directory '.*absent'"):
        spark.read.format("millrace").load(str(tmp_path / "absent"))
    with pytest.raises(Exception, match="no log archive at 'file:///"):
        spark.read.format("millrace").load((tmp_path / "absent").as_uri())


def test_min_partitions_reads_a_big_segment_in_pieces(spark: Any, tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "clicks", "clicks", config=LogConfig(fsync=False))
    value = b"v" * 100
    for start in range(0, 100_000, 5_000):
        log.append(
            [AppendRequest(records=[(b"k%d" % i, value, i) for i in range(start, start + 5_000)])]
        )
    log.close()  # one active segment of ~14 MiB: three pieces of at least 4 MiB
    whole = spark_jobs.read_log(spark, str(tmp_path), include_active=True)
    cut = spark_jobs.read_log(spark, str(tmp_path), include_active=True, min_partitions=3)
    assert (whole.rdd.getNumPartitions(), cut.rdd.getNumPartitions()) == (1, 3)
    assert collect(cut) == collect(whole)
    assert cut.count() == 100_000
    with pytest.raises(Exception, match="minPartitions='0'"):
        spark.read.format("millrace").option("minPartitions", "0").load(str(tmp_path)).count()
