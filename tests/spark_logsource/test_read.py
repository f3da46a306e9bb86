"""``spark_jobs.logsource.read_partition`` without Spark: one segment's rows as Arrow batches,
pushed-down bounds, corrupt entries, vanished and truncated segments."""

from __future__ import annotations

import io
import logging
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from millrace.injector.log import AppendRequest, CorruptEntry, StreamLog, scan_segment
from millrace.spark_jobs.logsource import (
    ARROW_SCHEMA,
    VANISHED,
    Bounds,
    CorruptSegmentError,
    Pushdown,
    SegmentPartition,
    pieces,
    plan_segments,
    read_partition,
)
from tests.spark_logsource._logs import (
    Row,
    archive,
    commit_ends,
    flip_byte_mid_file,
    oracle,
    write_logs,
    write_stream,
)

RECORDS_ONLY = frozenset({"record"})


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("log")
    write_logs(root)
    return root


def read(
    part: SegmentPartition, pushdown: Pushdown | None = None, **kw: Any
) -> list[dict[str, Any]]:
    batches = list(read_partition(part, pushdown or Pushdown(), **kw))
    assert all(b.schema.equals(ARROW_SCHEMA) and b.num_rows for b in batches)
    return [row for batch in batches for row in batch.to_pylist()]


def records(rows: list[dict[str, Any]]) -> list[Row]:
    assert all(r["corrupt_position"] is None and r["corrupt_reason"] is None for r in rows)
    return [
        (r["record_id"], r["key"], r["value"], r["event_time_ms"], r["ingest_time_ms"],
         r["stream"], r["offset"])
        for r in rows
    ]  # fmt: skip


def test_rows_are_the_logs_records(log_dir: Path) -> None:
    _, parts = plan_segments(str(log_dir), include_active=True)
    for stream in ("clicks", "views"):
        mine = [p for p in parts if p.stream == stream]
        rows = [row for part in mine for row in read(part, batch_rows=7)]
        assert records(rows) == oracle(log_dir, stream, include_active=True)
        assert {r["segment"] for r in rows} == {p.name for p in mine}
        for part in mine:  # each row in the segment named after it
            offsets = [r["offset"] for r in rows if r["segment"] == part.name]
            assert offsets[0] == part.base_offset
            if part.summary is not None:
                assert offsets[-1] == part.summary.end_offset - 1


def test_bounds_keep_exactly_the_rows_within(log_dir: Path) -> None:
    _, parts = plan_segments(str(log_dir), ["clicks"])
    expected = oracle(log_dir, "clicks")
    low_event = expected[len(expected) // 3][3]
    cases = [
        Pushdown(offset=Bounds(low=20, high=400), kinds=RECORDS_ONLY),
        Pushdown(offset=Bounds(values=frozenset({0, 5, 77, 78, 10**6})), kinds=RECORDS_ONLY),
        Pushdown(event_time=Bounds(low=low_event, high=low_event + 20_000), kinds=RECORDS_ONLY),
        Pushdown(
            offset=Bounds(low=30),
            event_time=Bounds(values=frozenset(r[3] for r in expected[::9])),
            kinds=RECORDS_ONLY,
        ),
    ]
    for pushdown in cases:
        got = [row for part in parts for row in read(part, pushdown, batch_rows=16)]
        assert records(got) == [
            r for r in expected if pushdown.offset.admits(r[6]) and pushdown.event_time.admits(r[3])
        ]


def test_a_read_stops_past_the_highest_offset_asked_for(log_dir: Path) -> None:
    _, parts = plan_segments(str(log_dir), ["clicks"])
    part = parts[0]
    assert part.summary is not None and part.summary.end_offset > 3
    data = Path(part.location).read_bytes()
    Path(part.location).write_bytes(data + b"\x00" * 8)  # damage after the offsets read
    try:
        pushdown = Pushdown(offset=Bounds(high=2), kinds=RECORDS_ONLY)
        assert [r["offset"] for r in read(part, pushdown, fail_on_corrupt=True)] == [0, 1, 2]
        with pytest.raises(CorruptSegmentError):
            read(part, fail_on_corrupt=True)
    finally:
        Path(part.location).write_bytes(data)


def test_a_corrupt_entry_is_one_row_after_the_records_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_stream(tmp_path, "clicks", 150)
    _, parts = plan_segments(str(tmp_path))
    victim = parts[1]
    expected = oracle(tmp_path, "clicks")
    corrupt = flip_byte_mid_file(Path(victim.location))
    with caplog.at_level(logging.WARNING, logger="millrace.spark_jobs.logsource"):
        rows = read(victim)
    *good, bad = rows
    assert good[0]["offset"] == victim.base_offset
    assert records(good) == [
        r for r in expected if victim.base_offset <= r[6] <= good[-1]["offset"]
    ]
    assert bad == {
        "record_id": None, "key": None, "value": None, "event_time_ms": None,
        "ingest_time_ms": None, "stream": "clicks", "offset": None, "segment": victim.name,
        "corrupt_position": corrupt.position, "corrupt_reason": corrupt.reason,
    }  # fmt: skip
    assert caplog.text.count("corrupt entry") == 1
    assert f"segment={victim.name} position={corrupt.position}" in caplog.text
    # Filters on columns that are NULL on it leave the corrupt row out, exactly as Spark would.
    assert read(victim, Pushdown(kinds=RECORDS_ONLY)) == good
    assert read(victim, Pushdown(kinds=frozenset({"corrupt"}))) == [bad]
    message = (
        f"corrupt entry in stream 'clicks' segment {victim.name} at byte {corrupt.position}: "
        f"{corrupt.reason}"
    )
    with pytest.raises(CorruptSegmentError, match=re.escape(message)):
        read(victim, fail_on_corrupt=True)


def test_a_bad_header_is_a_corrupt_entry_at_byte_0(tmp_path: Path) -> None:
    write_stream(tmp_path, "clicks", 40)
    _, parts = plan_segments(str(tmp_path))
    Path(parts[0].location).write_bytes(b"not a segment file at all")
    [row] = read(parts[0])
    assert row["corrupt_position"] == 0 and "magic" in row["corrupt_reason"]


def test_a_segment_cut_at_an_entry_boundary_is_caught_by_its_length(tmp_path: Path) -> None:
    write_stream(tmp_path, "clicks", 60)
    _, parts = plan_segments(str(tmp_path))
    path = Path(parts[0].location)
    size = path.stat().st_size
    cut = commit_ends(path)[-3]
    os.truncate(path, cut)  # every remaining entry is whole and valid
    *good, bad = read(parts[0])
    assert good and all(r["corrupt_reason"] is None for r in good)
    assert (bad["corrupt_position"], bad["corrupt_reason"]) == (
        cut,
        f"segment has {cut} bytes but its index says {size}",
    )


def test_a_segment_without_records_gives_no_rows(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "clicks", "clicks")
    log.append([AppendRequest(records=[])])  # a request that only commits
    log.close()
    _, [part] = plan_segments(str(tmp_path), include_active=True)
    assert read(part) == []


def test_a_segment_deleted_after_planning_is_a_vanished_row(tmp_path: Path) -> None:
    write_stream(tmp_path, "clicks", 60)
    _, parts = plan_segments(str(tmp_path))
    Path(parts[0].location).unlink()  # retention ran between planning and the task
    [row] = read(parts[0])
    assert (row["stream"], row["segment"]) == ("clicks", parts[0].name)
    assert (row["offset"], row["corrupt_position"], row["corrupt_reason"]) == (None, None, VANISHED)
    assert read(parts[0], Pushdown(kinds=frozenset({"corrupt"}))) == []
    with pytest.raises(CorruptSegmentError, match="vanished"):
        read(parts[0], fail_on_corrupt=True)


def test_an_archived_segment_reads_like_its_original(log_dir: Path, tmp_path: Path) -> None:
    uri = archive(log_dir, tmp_path / "archive")
    _, local = plan_segments(str(log_dir))
    _, archived = plan_segments(uri)
    assert [read(p) for p in archived] == [read(p) for p in local]
    (tmp_path / "archive" / "views" / archived[-1].name).unlink()
    assert read(archived[-1])[0]["corrupt_reason"] == VANISHED


def test_batches_hold_at_most_batch_rows(log_dir: Path) -> None:
    _, parts = plan_segments(str(log_dir), ["clicks"])
    batches = list(read_partition(parts[0], Pushdown(), batch_rows=10))
    assert [b.num_rows for b in batches[:-1]] == [10] * (len(batches) - 1)
    assert pa.Table.from_batches(batches).num_rows == sum(b.num_rows for b in batches)


def test_scan_segment_reads_a_file_object_like_a_path(log_dir: Path, tmp_path: Path) -> None:
    _, [part, *_] = plan_segments(str(log_dir))
    from_path = list(scan_segment(part.location, part.stream))
    with open(part.location, "rb") as f:
        f.read(5)  # read from the start whatever the position
        assert list(scan_segment(f, part.stream)) == from_path
        assert not f.closed
    damaged = bytearray(Path(part.location).read_bytes())
    damaged[-3] ^= 1
    copy = tmp_path / part.name
    copy.write_bytes(bytes(damaged))
    from_copy = list(scan_segment(copy, part.stream))
    assert isinstance(from_copy[-1], CorruptEntry)
    assert list(scan_segment(io.BytesIO(bytes(damaged)), part.stream)) == from_copy


@pytest.mark.parametrize(
    "damage", ["none", "corrupt mid-file", "cut at an entry boundary", "bad header", "vanished"]
)
@pytest.mark.parametrize("count", [2, 3, 7])
def test_a_segment_read_in_pieces_gives_the_rows_read_whole_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, count: int
) -> None:
    monkeypatch.setattr("millrace.spark_jobs.logsource._plan.MIN_PIECE_BYTES", 64)
    write_stream(tmp_path, "clicks", 150)
    _, parts = plan_segments(str(tmp_path), include_active=True)
    part = parts[1]
    pieces_of = pieces([part], count)  # planned before the damage, as Spark plans
    assert len(pieces_of) == count and pieces_of[0].first_byte == 0
    assert pieces_of[-1].end_byte is None
    path = Path(part.location)
    if damage == "corrupt mid-file":
        flip_byte_mid_file(path)
    elif damage == "cut at an entry boundary":
        os.truncate(path, commit_ends(path)[-3])
    elif damage == "bad header":
        path.write_bytes(b"not a segment file at all")
    elif damage == "vanished":
        path.unlink()
    pushdowns = [
        Pushdown(),
        Pushdown(kinds=RECORDS_ONLY),
        Pushdown(kinds=frozenset({"corrupt", "vanished"})),
        Pushdown(offset=Bounds(part.base_offset + 3, part.base_offset + 17)),
    ]
    for pushdown in pushdowns:
        whole = read(part, pushdown)
        assert [row for piece in pieces_of for row in read(piece, pushdown)] == whole
    if damage != "none":
        raised = 0
        for piece in pieces_of:
            try:
                read(piece, fail_on_corrupt=True)
            except CorruptSegmentError:
                raised += 1
        assert raised == 1, "one piece reports the segment's problem"


def test_pieces_are_made_only_where_there_are_fewer_segments_than_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_stream(tmp_path, "clicks", 150)
    _, parts = plan_segments(str(tmp_path), include_active=True)
    assert plan_segments(str(tmp_path), include_active=True, min_partitions=len(parts))[1] == parts
    _, cut = plan_segments(str(tmp_path), include_active=True, min_partitions=len(parts) + 1)
    assert cut == parts, "segments smaller than MIN_PIECE_BYTES stay whole"
    monkeypatch.setattr("millrace.spark_jobs.logsource._plan.MIN_PIECE_BYTES", 64)
    _, cut = plan_segments(str(tmp_path), include_active=True, min_partitions=4 * len(parts))
    assert len(parts) < len(cut) <= 4 * len(parts)
    assert [row for piece in cut for row in read(piece)] == [r for p in parts for r in read(p)]
