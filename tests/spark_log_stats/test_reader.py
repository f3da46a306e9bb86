"""``spark_jobs/log_stats.py``, its pure half without Spark: listing segment files,
folding the per-segment rows Spark aggregates, merging partial statistics, the driver's
output and exit codes (the rows themselves: ``test_spark_session.py``)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from millrace.injector.log import CorruptEntry
from millrace.spark_jobs import log_stats
from millrace.spark_jobs._log_reader import (
    LogDirError,
    SegmentStats,
    StreamStats,
    list_segments,
    list_streams,
    merge_streams,
)
from millrace.spark_jobs.logsource import VANISHED, SegmentPartition, plan_segments
from tests.spark_log_stats._logs import log_view, write_log

# ---------------------------------------------------------------------------
# Listing segment files
# ---------------------------------------------------------------------------


def test_lists_sealed_segments_as_the_log_does(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120)
    write_log(tmp_path, "clicks", 40)
    (tmp_path / "not-a-stream").mkdir()
    (tmp_path / "not-a-stream" / "notes.txt").write_text("no segments here")
    (tmp_path / "stray-file").write_text("")
    events = tmp_path / "events"
    # Files a reader must ignore: an index being written, an index without its .log.
    (events / "segment-00000000000099999999.idx.tmp").write_bytes(b"partial")
    (events / "segment-00000000000099999998.idx").write_bytes(b"leftover")

    assert list_streams(tmp_path) == ["clicks", "events"]
    infos, _ = log_view(events, "events")
    assert sum(1 for info in infos if info.sealed) >= 3 and not infos[-1].sealed

    streams, files = list_segments(tmp_path, ["events"])
    assert streams == ["events"]
    assert [(f.path, f.base_offset) for f in files] == [
        (info.path, info.base_offset) for info in infos if info.sealed
    ]
    assert all(f.sealed and f.stream == "events" for f in files)

    streams, files = list_segments(tmp_path, include_active=True)
    assert streams == ["clicks", "events"]
    assert [f.path for f in files if f.stream == "events"] == [info.path for info in infos]
    assert [f.sealed for f in files if f.stream == "events"] == [info.sealed for info in infos]


def test_a_segment_followed_by_another_is_sealed_even_without_its_index(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 60)
    infos, _ = log_view(tmp_path / "events", "events")
    Path(infos[0].path).with_suffix(".idx").unlink()  # writers rebuild a lost index
    _, files = list_segments(tmp_path)
    assert [f.path for f in files] == [info.path for info in infos if info.sealed]


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        (["events", "nope"], "no stream 'nope'"),
        (["../events"], "is not a stream name"),
        ([".."], "is not a stream name"),
        ([""], "is not a stream name"),
    ],
)
def test_unknown_streams_are_refused(tmp_path: Path, streams: list[str], message: str) -> None:
    write_log(tmp_path, "events", 5)
    with pytest.raises(LogDirError, match=re.escape(message)):
        list_segments(tmp_path, streams)


def test_a_missing_log_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogDirError, match="no log directory"):
        list_segments(tmp_path / "absent")
    with pytest.raises(LogDirError, match="no log directory"):
        list_streams(tmp_path / "absent")


# ---------------------------------------------------------------------------
# One segment: its row of the Spark aggregation, folded
# ---------------------------------------------------------------------------


def partition(stream: str, base: int, *, sealed: bool = True) -> SegmentPartition:
    name = f"segment-{base:020d}.log"
    return SegmentPartition(stream, f"/l/{stream}/{name}", base, name, sealed, archived=False)


def aggregate_row(stream: str, base: int, **values: object) -> dict[str, object]:
    row: dict[str, object] = {name: None for name, _, _ in log_stats.AGGREGATES}
    return {**row, "records": 0, "stream": stream, "segment": f"segment-{base:020d}.log", **values}


def test_segment_partials_fold_aggregated_rows() -> None:
    parts = [partition("events", 0), partition("events", 10), partition("clicks", 0)]
    rows = [
        aggregate_row("events", 0, records=10, first_offset=0, last_offset=9, min_event_ms=-5,
                      max_event_ms=70, min_ingest_ms=100, max_ingest_ms=200),
        aggregate_row("events", 10, records=2, first_offset=10, last_offset=11, min_event_ms=3,
                      max_event_ms=90, min_ingest_ms=300, max_ingest_ms=300,
                      corrupt_position=1234, corrupt_reason="crc mismatch"),
        aggregate_row("clicks", 0, corrupt_position=0, corrupt_reason="bad segment magic"),
        aggregate_row("clicks", 99, records=5),  # sealed after the listing: not reported
    ]  # fmt: skip
    partials = log_stats.segment_partials(parts, rows, exists=lambda _: True)
    assert partials == [
        SegmentStats("events", "/l/events/segment-00000000000000000000.log", 0, True, records=10,
                     first_offset=0, last_offset=9, min_event_ms=-5, max_event_ms=70,
                     min_ingest_ms=100, max_ingest_ms=200),
        SegmentStats("events", "/l/events/segment-00000000000000000010.log", 10, True, records=2,
                     first_offset=10, last_offset=11, min_event_ms=3, max_event_ms=90,
                     min_ingest_ms=300, max_ingest_ms=300,
                     corrupt=CorruptEntry(position=1234, reason="crc mismatch")),
        SegmentStats("clicks", "/l/clicks/segment-00000000000000000000.log", 0, True,
                     corrupt=CorruptEntry(position=0, reason="bad segment magic")),
    ]  # fmt: skip


def test_a_segment_without_rows_is_empty_or_vanished() -> None:
    empty, gone, late = partition("events", 0, sealed=False), partition("a", 5), partition("b", 7)
    rows = [aggregate_row("b", 7, corrupt_reason=VANISHED)]  # deleted before its task opened it
    partials = log_stats.segment_partials([empty, gone, late], rows, exists=lambda p: p is empty)
    assert partials == [
        SegmentStats("events", empty.location, 0, False),
        SegmentStats("a", gone.location, 5, True, vanished=True),
        SegmentStats("b", late.location, 7, True, vanished=True),
    ]
    merged = merge_streams(["a", "b", "events"], partials)
    assert merged["events"] == StreamStats("events", segments=1)
    assert merged["a"] == StreamStats("a", vanished=(gone.name,))
    report = log_stats.build_report("/l", True, ["a", "b", "events"], partials)
    assert "VANISHED stream=a segment=segment-00000000000000000005.log" in (
        log_stats.stats_lines(report)
    )


def test_the_job_plans_what_the_log_lists(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120)
    _, files = list_segments(tmp_path, include_active=True)
    streams, parts = plan_segments(str(tmp_path), include_active=True)
    assert streams == ["events"]
    assert [(p.stream, p.location, p.base_offset, p.sealed) for p in parts] == [
        (f.stream, f.path, f.base_offset, f.sealed) for f in files
    ]


# ---------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------


def random_partial(rng: random.Random, stream: str, number: int) -> SegmentStats:
    path = f"/log/{stream}/segment-{number * 100:020d}.log"
    if rng.random() < 0.2:
        return SegmentStats(stream, path, number * 100, True)  # no records
    events = [rng.randrange(-(10**6), 10**6) for _ in range(3)]
    ingests = [rng.randrange(10**6) for _ in range(3)]
    corrupt = CorruptEntry(position=rng.randrange(16, 999), reason="crc mismatch")
    return SegmentStats(
        stream, path, number * 100, True,
        records=rng.randint(1, 100), first_offset=number * 100, last_offset=number * 100 + 5,
        min_event_ms=min(events), max_event_ms=max(events),
        min_ingest_ms=min(ingests), max_ingest_ms=max(ingests),
        corrupt=corrupt if rng.random() < 0.3 else None,
    )  # fmt: skip


def test_merging_is_order_independent_and_adds_up() -> None:
    rng = random.Random(7)
    partials = [random_partial(rng, "s", n) for n in range(8)]
    expected = merge_streams(["s"], partials)["s"]
    for _ in range(20):
        shuffled = partials[:]
        rng.shuffle(shuffled)
        assert merge_streams(["s"], shuffled)["s"] == expected
        # Any grouping (as a tree reduction would do) gives the same.
        cut = rng.randrange(len(shuffled))
        left = merge_streams(["s"], shuffled[:cut])["s"]
        right = merge_streams(["s"], shuffled[cut:])["s"]
        assert left.merge(right) == right.merge(left) == expected
    assert expected.records == sum(p.records for p in partials)
    assert expected.segments == len(partials)
    assert expected.min_event_ms == min(
        p.min_event_ms for p in partials if p.min_event_ms is not None
    )
    assert expected.max_ingest_ms == max(
        p.max_ingest_ms for p in partials if p.max_ingest_ms is not None
    )
    assert len(expected.corrupt) == sum(1 for p in partials if p.corrupt is not None)
    assert list(expected.corrupt) == sorted(expected.corrupt, key=lambda c: (c.segment, c.position))
    assert (
        StreamStats.empty("s").merge(expected) == expected == expected.merge(StreamStats.empty("s"))
    )


def test_merge_streams_keeps_unread_streams_and_refuses_strangers() -> None:
    rng = random.Random(1)
    merged = merge_streams(["b", "a"], [random_partial(rng, "a", 0)])
    assert list(merged) == ["a", "b"]
    assert merged["b"] == StreamStats("b")
    with pytest.raises(ValueError, match="belongs to no listed stream"):
        merge_streams(["a"], [random_partial(rng, "c", 0)])
    with pytest.raises(ValueError, match="cannot merge"):
        StreamStats("a").merge(StreamStats("b"))


# ---------------------------------------------------------------------------
# Output and the command line (no Spark)
# ---------------------------------------------------------------------------


def test_stats_and_corrupt_lines_and_table() -> None:
    partials = [
        SegmentStats("events", "/l/events/segment-00000000000000000000.log", 0, True, records=10,
                     first_offset=0, last_offset=9, min_event_ms=-5, max_event_ms=70,
                     min_ingest_ms=100, max_ingest_ms=200),
        SegmentStats("events", "/l/events/segment-00000000000000000010.log", 10, True, records=2,
                     first_offset=10, last_offset=11, min_event_ms=3, max_event_ms=90,
                     min_ingest_ms=300, max_ingest_ms=300,
                     corrupt=CorruptEntry(position=1234, reason="crc mismatch")),
    ]  # fmt: skip
    report = log_stats.build_report(Path("/l"), False, ["events", "idle"], partials)
    assert log_stats.stats_lines(report) == [
        "STATS stream=events records=12 min_event_ms=-5 max_event_ms=90 segments=2 corrupt=1",
        "STATS stream=idle records=0 min_event_ms=none max_event_ms=none segments=0 corrupt=0",
        "CORRUPT stream=events segment=segment-00000000000000000010.log position=1234 "
        "reason=crc mismatch",
    ]
    table = log_stats.format_table(report).splitlines()
    assert table[1].split() == [
        "stream", "segments", "records", "min_event_ms", "max_event_ms",
        "min_ingest_ms", "max_ingest_ms", "corrupt",
    ]  # fmt: skip
    assert table[3].split() == ["events", "2", "12", "-5", "90", "100", "300", "1"]
    assert table[4].split() == ["idle", "0", "0", "none", "none", "none", "none", "0"]
    data = json.loads(json.dumps(report.to_dict()))
    assert data["streams"]["events"]["records"] == 12
    assert data["corrupt"] == [
        {"stream": "events", "segment": "segment-00000000000000000010.log",
         "position": 1234, "reason": "crc mismatch"},
    ]  # fmt: skip
    assert [s["base_offset"] for s in data["segments"]] == [0, 10]


def test_main_exits_2_for_a_missing_log_dir_or_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert log_stats.main(["--log-dir", str(tmp_path / "absent")]) == 2
    assert "no log directory" in capsys.readouterr().err
    write_log(tmp_path, "events", 5)
    assert log_stats.main(["--log-dir", str(tmp_path), "--stream", "events", "nope"]) == 2
    assert "no stream 'nope'" in capsys.readouterr().err


def test_main_without_sealed_segments_needs_no_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_log(tmp_path, "events", 3, segment_bytes=1 << 20)  # one active segment only
    out = tmp_path / "stats.json"
    assert log_stats.main(["--log-dir", str(tmp_path), "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "STATS stream=events records=0 min_event_ms=none max_event_ms=none segments=0 corrupt=0"
        in lines
    )
    assert json.loads(out.read_text())["streams"]["events"]["segments"] == 0
