"""``spark.readStream.format("millrace")`` (slow): following a log a writer is appending to.

The pure halves (offsets, planning, a torn tail past a micro-batch's end) run
without Spark; the Spark test runs micro-batches with ``foreachBatch`` while
a real ``StreamLog`` writer stays open, then restarts from the checkpoint."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from millrace.spark_jobs.logsource import (
    ARROW_SCHEMA,
    CorruptSegmentError,
    MillraceStreamReader,
    StreamOptions,
    StreamPartition,
    read_range,
)
from tests.spark_logsource._logs import T0, Row, archive, oracle
from tests.spark_logsource._session import shared_spark

pytestmark = pytest.mark.slow

COLUMNS = (
    "record_id", "key", "value", "event_time_ms", "ingest_time_ms", "stream", "offset",
)  # fmt: skip


def append(log: StreamLog, requests: int, first: int) -> None:
    """``requests`` requests of 1..7 records, numbered from ``first``."""
    rng = random.Random(f"{log.stream}-{first}")
    for number in range(first, first + requests):
        records = [
            (f"k{rng.randrange(20)}".encode(), f"{log.stream}-{number}-{i}".encode() * 3, T0 + i)
            for i in range(rng.randint(1, 7))
        ]
        log.append([AppendRequest(records=records, idempotency_key=f"r{number}".encode())])


def open_writer(log_dir: Path, stream: str) -> StreamLog:
    return StreamLog.open(log_dir / stream, stream, config=LogConfig(segment_bytes=2048))


def rows_of(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pa.Table.from_batches(batches, schema=ARROW_SCHEMA).to_pylist()
    return rows


def as_rows(rows: list[dict[str, Any]]) -> list[Row]:
    return [tuple(r[c] for c in COLUMNS) for r in rows]


def read_all(reader: MillraceStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    batches = [b for part in reader.partitions(start, end) for b in reader.read(part)]
    return rows_of(batches)


# -- without Spark ------------------------------------------------------------


def test_offsets_and_ranges_follow_the_writer(tmp_path: Path) -> None:
    log = open_writer(tmp_path, "clicks")
    try:
        append(log, 40, 0)
        reader = MillraceStreamReader(str(tmp_path), None)
        assert reader.streams == ("clicks",)
        start = reader.initialOffset()
        assert start == {"offsets": {"clicks": 0}}
        middle = reader.latestOffset(start, None)
        assert middle == {"offsets": {"clicks": log.next_offset}}
        append(log, 40, 40)  # rolls to new segments
        end = reader.latestOffset(middle, None)
        assert end == {"offsets": {"clicks": log.next_offset}}
        parts = reader.partitions(middle, end)
        assert len(parts) > 1
        assert all(isinstance(p, StreamPartition) for p in parts)
        first = read_all(reader, start, middle)
        second = read_all(reader, middle, end)
        assert as_rows(first + second) == oracle(tmp_path, "clicks", include_active=True)
        assert reader.partitions(end, end) == []
        latest = MillraceStreamReader(str(tmp_path), ["clicks"], starting="latest")
        assert latest.initialOffset() == end
    finally:
        log.close()


def test_a_torn_tail_past_the_range_is_not_corrupt(tmp_path: Path) -> None:
    log = open_writer(tmp_path, "clicks")
    try:
        append(log, 3, 0)
        reader = MillraceStreamReader(str(tmp_path), ["clicks"], fail_on_corrupt=True)
        start, end = reader.initialOffset(), reader.latestOffset(None, None)
        (part,) = reader.partitions(start, end)
        assert isinstance(part, StreamPartition)
        with open(part.segment.location, "ab") as f:  # a request being written: half an entry
            f.write(b"\x00\x00\x00\x40\x12\x34\x56\x78\x01partial")
        assert as_rows(rows_of(list(read_range(part, fail_on_corrupt=True)))) == oracle(
            tmp_path, "clicks", include_active=True
        )
        assert reader.latestOffset(end, None) == end  # the torn request is not committed
        beyond = StreamPartition(part.segment, part.low, part.high + 1)
        with pytest.raises(CorruptSegmentError):
            list(read_range(beyond, fail_on_corrupt=True))
        rows = rows_of(list(read_range(beyond)))
        assert len(rows) == part.high - part.low + 1 and rows[-1]["corrupt_reason"]
    finally:
        log.close()


def test_archive_offsets_end_at_the_last_archived_segment(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    log = open_writer(log_dir, "clicks")
    try:
        append(log, 60, 0)
        sealed = [s for s in log.segments() if s.sealed]
    finally:
        log.close()
    uri = archive(log_dir, tmp_path / "archive", ("clicks",))
    reader = MillraceStreamReader(uri, None)
    assert reader.streams == ("clicks",)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert end == {"offsets": {"clicks": sealed[-1].end_offset}}
    rows = as_rows(read_all(reader, start, end))
    assert rows == [r for r in oracle(log_dir, "clicks") if r[6] < sealed[-1].end_offset]


def test_starting_offsets_option() -> None:
    assert StreamOptions.parse({}).starting == "earliest"
    assert StreamOptions.parse({"startingOffsets": "LATEST"}).starting == "latest"
    assert StreamOptions.parse({"startingOffsets": '{"clicks": 5}'}).starting == {"clicks": 5}
    for bad in ("newest", '{"clicks": -1}', "[1]", '{"clicks": "5"}'):
        with pytest.raises(ValueError, match="startingOffsets"):
            StreamOptions.parse({"startingOffsets": bad})


# -- in Spark -----------------------------------------------------------------


class Collected:
    """What ``foreachBatch`` saw: the rows of every micro-batch, in order."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def __call__(self, batch: Any, batch_id: int) -> None:
        self.rows.extend(row.asDict() for row in batch.collect())

    def of(self, stream: str) -> list[Row]:
        assert all(r["corrupt_reason"] is None for r in self.rows)
        return as_rows([r for r in self.rows if r["stream"] == stream])


def run(spark: Any, log_dir: Path, checkpoint: Path, sink: Collected, **options: str) -> None:
    """One ``Trigger.AvailableNow`` run of a streaming read of ``log_dir`` (to its end now)."""
    stream = spark.readStream.format("millrace").options(**options).load(str(log_dir))
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None


def test_spark_follows_the_live_log(tmp_path: Path) -> None:
    spark = shared_spark()
    log_dir = tmp_path / "log"
    clicks, views = open_writer(log_dir, "clicks"), open_writer(log_dir, "views")
    try:
        append(clicks, 30, 0)
        append(views, 10, 0)
        every, later = Collected(), Collected()
        run(spark, log_dir, tmp_path / "cp-every", every)
        run(spark, log_dir, tmp_path / "cp-later", later, stream="clicks", startingOffsets="latest")
        assert every.of("clicks") == oracle(log_dir, "clicks", include_active=True)
        assert later.rows == []
        seen = clicks.next_offset
        rolls = len(clicks.segments())
        append(clicks, 30, 30)  # more records, new segments
        append(views, 5, 10)
        assert len(clicks.segments()) > rolls
        run(spark, log_dir, tmp_path / "cp-every", every)  # restarts from its checkpoint
        run(spark, log_dir, tmp_path / "cp-later", later, stream="clicks", startingOffsets="latest")
        for stream in ("clicks", "views"):
            assert every.of(stream) == oracle(log_dir, stream, include_active=True)
        assert later.of("clicks") == [
            r for r in oracle(log_dir, "clicks", include_active=True) if r[6] >= seen
        ]
        assert later.of("views") == []
    finally:
        clicks.close()
        views.close()
