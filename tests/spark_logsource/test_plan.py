"""``spark_jobs.logsource`` planning, without Spark: filters pushed down, segments listed
(local directories and archives) and pruned by their index footers and manifests."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from millrace.spark_jobs.logsource import (
    Bounds,
    LogDirError,
    Pushdown,
    ReadOptions,
    SegmentPartition,
    check_location,
    plan_segments,
    push_filters,
)
from tests.spark_logsource._logs import T0, archive, segments, write_logs, write_stream
from tests.support import ROOT


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("log")
    write_logs(root)
    return root


@pytest.fixture(scope="module")
def archive_uri(log_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return archive(log_dir, tmp_path_factory.mktemp("archive"))


def planned(location: str | Path, pushdown: Pushdown | None = None, **kw: object) -> list[str]:
    """``stream/segment`` of every planned partition."""
    _, parts = plan_segments(str(location), pushdown=pushdown, **kw)  # type: ignore[arg-type]
    return [f"{p.stream}/{p.name}" for p in parts]


# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------


def test_pushed_filters_are_kept_or_given_back() -> None:
    keep = [
        GreaterThanOrEqual(("offset",), 10),
        LessThan(("offset",), 50),
        In(("stream",), ("clicks", "views")),
        EqualTo(("segment",), "segment-00000000000000000000.log"),
        GreaterThan(("event_time_ms",), T0),
        IsNotNull(("offset",)),
    ]
    back = [
        GreaterThan(("ingest_time_ms",), 0),  # not a column pushed down
        Not(EqualTo(("offset",), 3)),
        StringStartsWith(("stream",), "cl"),
        EqualTo(("offset",), "10"),  # not an integer literal
        EqualTo(("stream",), 7),
        EqualTo(("a", "b"), 1),
    ]
    pushdown, rest = push_filters(Pushdown(), [*keep, *back])
    assert rest == back and all(a is b for a, b in zip(rest, back, strict=True))
    assert pushdown.offset == Bounds(low=10, high=49)
    assert pushdown.event_time == Bounds(low=T0 + 1)
    assert pushdown.streams == frozenset({"clicks", "views"})
    assert pushdown.segments == frozenset({"segment-00000000000000000000.log"})
    # A comparison with NULL is not true: corrupt and vanished rows cannot pass.
    assert pushdown.kinds == {"record"}


def test_filters_on_nulls_choose_the_kinds_of_rows() -> None:
    def kinds(*filters: object) -> set[str]:
        pushdown, rest = push_filters(Pushdown(), list(filters))  # type: ignore[arg-type]
        assert rest == []
        return set(pushdown.kinds)

    assert kinds() == {"record", "corrupt", "vanished"}
    assert kinds(IsNotNull(("corrupt_reason",))) == {"corrupt", "vanished"}
    assert kinds(IsNotNull(("corrupt_position",))) == {"corrupt"}
    assert kinds(IsNull(("corrupt_reason",))) == {"record"}
    assert kinds(IsNull(("offset",))) == {"corrupt", "vanished"}
    assert kinds(IsNotNull(("stream",))) == {"record", "corrupt", "vanished"}
    assert kinds(IsNull(("segment",))) == set()
    assert kinds(LessThanOrEqual(("event_time_ms",), 5), IsNull(("record_id",))) == set()


def test_bounds_combine_and_test_ranges() -> None:
    bounds = Bounds().narrowed(In, (3, 9, 20)).narrowed(GreaterThan, 3).narrowed(LessThan, 20)
    assert bounds == Bounds(low=4, high=19, values=frozenset({3, 9, 20}))
    assert [v for v in range(25) if bounds.admits(v)] == [9]
    assert bounds.overlaps(0, 9) and bounds.overlaps(9, None)
    assert not bounds.overlaps(10, None) and not bounds.overlaps(0, 8)
    assert Bounds(low=5).overlaps(0, None) and not Bounds(high=5).overlaps(6, None)
    assert Bounds().narrowed(EqualTo, 4).narrowed(EqualTo, 5).values == frozenset()


# ---------------------------------------------------------------------------
# Listing and pruning
# ---------------------------------------------------------------------------


def test_index_footers_say_what_the_log_says(log_dir: Path) -> None:
    for stream in ("clicks", "views"):
        infos = segments(log_dir, stream)
        _, parts = plan_segments(str(log_dir), [stream], include_active=True)
        assert [(p.location, p.base_offset, p.sealed) for p in parts] == [
            (i.path, i.base_offset, i.sealed) for i in infos
        ]
        for part, info in zip(parts, infos, strict=True):
            if not info.sealed:
                assert part.summary is None
                continue
            assert part.summary is not None
            summary = part.summary
            assert (summary.end_offset, summary.records, summary.size_bytes) == (
                info.end_offset,
                info.records,
                info.size_bytes,
            )
            assert (summary.min_event_ms, summary.max_event_ms) == (
                info.min_event_ms,
                info.max_event_ms,
            )


def test_sealed_segments_only_unless_include_active(log_dir: Path) -> None:
    streams, parts = plan_segments(str(log_dir))
    assert streams == ["clicks", "views"]
    assert all(p.sealed and not p.archived for p in parts)
    everything = planned(log_dir, include_active=True)
    assert len(everything) == len(parts) + 2  # each stream's active segment
    assert planned(log_dir, streams=["views"]) == [
        f"views/{Path(i.path).name}" for i in segments(log_dir, "views") if i.sealed
    ]


def test_offsets_and_event_times_prune_segments(log_dir: Path) -> None:
    infos = [i for i in segments(log_dir, "clicks") if i.sealed]
    middle = infos[len(infos) // 2]
    pushdown, _ = push_filters(
        Pushdown(),
        [
            EqualTo(("stream",), "clicks"),
            GreaterThanOrEqual(("offset",), middle.base_offset),
            LessThan(("offset",), middle.end_offset),
        ],
    )
    assert planned(log_dir, pushdown) == [f"clicks/{Path(middle.path).name}"]
    # One offset on each side of a boundary: the two segments holding them.
    pushdown, _ = push_filters(Pushdown(), [In(("offset",), (middle.base_offset - 1, 10**9))])
    assert [p for p in planned(log_dir, pushdown) if p.startswith("clicks/")] == [
        f"clicks/{Path(infos[len(infos) // 2 - 1].path).name}"
    ]
    assert middle.min_event_ms is not None and middle.max_event_ms is not None
    pushdown, _ = push_filters(
        Pushdown(),
        [
            GreaterThanOrEqual(("event_time_ms",), middle.min_event_ms),
            LessThanOrEqual(("event_time_ms",), middle.max_event_ms),
        ],
    )
    kept = planned(log_dir, pushdown)
    assert f"clicks/{Path(middle.path).name}" in kept
    assert len(kept) < len(planned(log_dir))
    for stream in ("clicks", "views"):
        for info in segments(log_dir, stream):
            assert info.min_event_ms is not None and info.max_event_ms is not None
            overlaps = (
                info.max_event_ms >= middle.min_event_ms
                and info.min_event_ms <= middle.max_event_ms
            )
            assert (f"{stream}/{Path(info.path).name}" in kept) == (overlaps and info.sealed)
    # Nothing can pass: no partitions at all.
    nothing, _ = push_filters(Pushdown(), [IsNull(("stream",))])
    assert planned(log_dir, nothing) == []
    assert planned(log_dir, Pushdown(streams=frozenset({"nope"}))) == []


def test_a_segment_without_its_index_is_read_whole(tmp_path: Path) -> None:
    write_stream(tmp_path, "clicks", 60)
    infos = segments(tmp_path, "clicks")
    Path(infos[0].path).with_suffix(".idx").unlink()
    Path(infos[1].path).with_suffix(".idx").write_bytes(b"garbage")
    _, parts = plan_segments(str(tmp_path))
    assert [p.summary is None for p in parts[:3]] == [True, True, False]
    # Far outside every segment's event times: only those without a summary stay.
    pushdown = Pushdown(event_time=Bounds(low=0, high=5), kinds=frozenset({"record"}))
    assert planned(tmp_path, pushdown) == [f"clicks/{Path(i.path).name}" for i in infos[:2]]


# ---------------------------------------------------------------------------
# Archives
# ---------------------------------------------------------------------------


def test_an_archive_plans_what_the_local_log_plans(log_dir: Path, archive_uri: str) -> None:
    local_streams, local = plan_segments(str(log_dir))
    streams, parts = plan_segments(archive_uri)
    assert streams == local_streams
    assert all(p.archived and p.location.startswith("file://") for p in parts)

    def strip(p: SegmentPartition) -> tuple[object, ...]:
        summary = p.summary and (p.summary.end_offset, p.summary.records, p.summary.size_bytes)
        return (p.stream, p.name, p.base_offset, summary)

    assert [strip(p) for p in parts] == [strip(p) for p in local]
    pushdown = Pushdown(offset=Bounds(low=40, high=60), kinds=frozenset({"record"}))
    assert planned(archive_uri, pushdown) == planned(log_dir, pushdown)
    views = Pushdown(streams=frozenset({"views"}))
    assert planned(archive_uri, views) == [p for p in planned(log_dir) if p.startswith("views/")]
    # includeActive has no meaning for an archive: it holds sealed segments only.
    assert planned(archive_uri, include_active=True) == planned(archive_uri)


def test_an_archive_segment_exists_once_its_manifest_does(
    log_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "archive"
    uri = archive(log_dir, root, ("clicks",))
    manifests = sorted((root / "clicks" / "manifest").iterdir())
    manifests[-1].unlink()  # still being copied
    (root / "clicks" / "notes.txt").write_text("not a segment")
    entry = json.loads(manifests[0].read_text())
    manifests[0].write_text(json.dumps({**entry, "stream": "other"}))
    with caplog.at_level(logging.WARNING, logger="millrace.spark_jobs.logsource"):
        _, parts = plan_segments(uri)
    assert [p.name for p in parts] == [m.with_suffix(".log").name for m in manifests[:-1]]
    assert parts[0].summary is None and all(p.summary is not None for p in parts[1:])
    assert "manifest entry of stream=clicks" in caplog.text


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "streams", "message"),
    [
        ("absent", None, "no log directory"),
        ("file:///nonexistent/millrace-archive", None, "no log archive at"),
        ("", ["nope"], "no stream 'nope'"),
        ("", ["../clicks"], "is not a stream name"),
        ("archive", ["nope"], "no stream 'nope' in the log archive"),
        ("archive", [".."], "is not a stream name"),
        ("nosuchscheme://x", None, "cannot open 'nosuchscheme://x'"),
    ],
)
def test_a_missing_log_is_a_clear_error(
    log_dir: Path,
    archive_uri: str,
    where: str,
    streams: list[str] | None,
    message: str,
) -> None:
    if where == "archive":
        location = archive_uri
    elif "://" in where:
        location = where
    else:
        location = str(log_dir / where) if where else str(log_dir)
    with pytest.raises(LogDirError, match=re.escape(message)):
        plan_segments(location, streams)
    if streams is None:
        with pytest.raises(LogDirError, match=re.escape(message)):
            check_location(location)


def test_options_are_checked() -> None:
    assert ReadOptions.parse({"path": "/l", "stream": "a, b"}) == ReadOptions("/l", ("a", "b"))
    assert ReadOptions.parse(
        {"path": "/l", "includeActive": "TRUE", "corrupt": "fail"}
    ) == ReadOptions("/l", None, True, True)
    with pytest.raises(LogDirError, match="load"):
        ReadOptions.parse({})
    for bad, message in [
        ({"stream": "a,,b"}, "empty stream"),
        ({"includeActive": "yes"}, "includeActive='yes'"),
        ({"corrupt": "skip"}, "corrupt='skip'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            ReadOptions.parse({"path": "/l", **bad})


def test_a_copy_of_a_stream_directory_lists_alike(log_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(log_dir / "views", tmp_path / "views")
    assert planned(tmp_path) == [p for p in planned(log_dir) if p.startswith("views/")]


# ---------------------------------------------------------------------------
# The public surface
# ---------------------------------------------------------------------------


def test_exported_names_are_pinned() -> None:
    from millrace import spark_jobs
    from millrace.spark_jobs import logsource

    assert sorted(spark_jobs.__all__) == ["FILTER_PUSHDOWN", "read_log", "register"]
    assert sorted(logsource.__all__) == [
        "ARROW_SCHEMA", "BATCH_ROWS", "Bounds", "COLUMNS", "CorruptSegmentError", "LogDirError",
        "LogReader", "MillraceLogSource", "MillraceStreamReader", "Pushdown", "ReadOptions",
        "SCHEMA", "SegmentPartition", "SegmentSummary", "StreamOptions", "StreamPartition",
        "VANISHED", "check_location", "is_uri", "pieces", "plan_segments", "push_filters",
        "read_partition",
        "read_range", "segment_exists",
    ]  # fmt: skip
    assert spark_jobs.logsource.MillraceLogSource.name() == "millrace"


def test_spark_jobs_imports_without_pyspark() -> None:
    code = (
        "import sys, millrace.spark_jobs; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_arrow_schema_is_the_one_spark_checks_batches_against() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from millrace.spark_jobs.logsource import ARROW_SCHEMA, COLUMNS

    types = {"binary": BinaryType(), "bigint": LongType(), "string": StringType()}
    schema = StructType([StructField(name, types[kind]) for name, kind in COLUMNS])
    assert to_arrow_schema(schema, timezone="UTC").equals(ARROW_SCHEMA)
