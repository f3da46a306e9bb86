"""``spark_jobs/log_stats.py``: log statistics computed by Spark, one task per segment file.

The pure half (listing, scanning one segment, merging) is tested without
Spark. The acceptance tests (slow) write a log with a real injector process,
run the job with the real ``spark-submit --master local[2]`` and compare its
numbers with the log's own: the injector's acknowledgements and
``StreamLog.segments()``/``read()``.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from injector.client import IngestClient
from injector.log import (
    AppendRequest,
    CorruptEntry,
    LogConfig,
    LogRecord,
    SegmentInfo,
    StreamLog,
    scan_segment,
)
from spark_jobs import log_stats
from spark_jobs._log_reader import (
    CorruptReport,
    LogDirError,
    SegmentStats,
    StreamStats,
    list_segments,
    list_streams,
    merge_streams,
    scan_task,
    segment_stats,
)
from tests.cluster import ROOT, free_port, stop_gracefully

JOB = ROOT / "spark_jobs" / "log_stats.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
T0 = 1_700_000_000_000


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def write_log(directory: Path, stream: str, requests: int, *, segment_bytes: int = 2048) -> None:
    """A closed log of ``requests`` requests of 1..7 records with scattered event times."""
    rng = random.Random(stream)
    log = StreamLog.open(directory / stream, stream, config=LogConfig(segment_bytes=segment_bytes))
    for number in range(requests):
        records = [
            (
                f"k{i}".encode(),
                f"{stream}-{number}-{i}".encode() * 3,
                T0 + rng.randrange(-5000, 5000),
            )
            for i in range(rng.randint(1, 7))
        ]
        log.append([AppendRequest(records=records, idempotency_key=f"r{number}".encode())])
    log.close()


def log_view(stream_dir: Path, stream: str) -> tuple[list[SegmentInfo], list[LogRecord]]:
    """The log's own description of itself: its segments and every durable record."""
    log = StreamLog.open(stream_dir, stream, read_only=True)
    try:
        return log.segments(), log.read(0, 10**9)
    finally:
        log.close()


def flip_byte_mid_file(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))


def expected_stats(
    stream: str, segments: list[SegmentInfo], records: list[LogRecord]
) -> dict[str, Any]:
    """Totals over ``segments`` as the log itself reports them."""
    held = [r for r in records for s in segments if s.base_offset <= r.offset < s.end_offset]
    return {
        "stream": stream,
        "records": sum(s.records for s in segments),
        "held": len(held),
        "min_event_ms": min((s.min_event_ms for s in segments if s.min_event_ms is not None),
                            default=None),
        "max_event_ms": max((s.max_event_ms for s in segments if s.max_event_ms is not None),
                            default=None),
        "min_ingest_ms": min((r.ingest_time_ms for r in held), default=None),
        "max_ingest_ms": max((r.ingest_time_ms for r in held), default=None),
        "segments": len(segments),
    }  # fmt: skip


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
# One segment: partial statistics
# ---------------------------------------------------------------------------


def test_segment_stats_match_each_segment_of_the_log(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120)
    infos, records = log_view(tmp_path / "events", "events")
    _, files = list_segments(tmp_path, include_active=True)
    assert len(files) == len(infos)
    for file, info in zip(files, infos, strict=True):
        stats = segment_stats(file)
        held = [r for r in records if info.base_offset <= r.offset < info.end_offset]
        assert stats.corrupt is None and not stats.vanished
        assert stats.records == info.records == len(held)
        assert (stats.first_offset, stats.last_offset) == (info.base_offset, info.end_offset - 1)
        assert (stats.min_event_ms, stats.max_event_ms) == (info.min_event_ms, info.max_event_ms)
        assert stats.min_ingest_ms == min(r.ingest_time_ms for r in held)
        assert stats.max_ingest_ms == max(r.ingest_time_ms for r in held)
        # What crosses from an executor to the driver: plain JSON values, round-tripping.
        wire = scan_task(file.task())
        assert json.loads(json.dumps(wire)) == wire
        assert SegmentStats.from_dict(wire) == stats


def test_a_segment_without_records_has_no_times(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "events", "events")
    log.append([AppendRequest(records=[])])  # a request that only commits
    log.close()
    _, [file] = list_segments(tmp_path, include_active=True)
    stats = segment_stats(file)
    assert stats == SegmentStats("events", file.path, 0, False)
    assert StreamStats.of_segment(stats) == StreamStats("events", segments=1)


def test_a_corrupt_entry_is_reported_and_the_records_before_it_count(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 120)
    infos, _ = log_view(tmp_path / "events", "events")
    victim = Path(infos[1].path)
    flip_byte_mid_file(victim)
    items = list(scan_segment(victim, "events"))
    assert isinstance(items[-1], CorruptEntry)

    _, files = list_segments(tmp_path)
    stats = segment_stats(files[1])
    assert stats.corrupt == items[-1]
    assert stats.records == len(items) - 1 < infos[1].records
    assert SegmentStats.from_dict(scan_task(files[1].task())) == stats
    merged = merge_streams(["events"], [segment_stats(f) for f in files])["events"]
    assert merged.segments == len(files)
    assert (
        merged.records
        == sum(i.records for i in infos if i.sealed) - infos[1].records + len(items) - 1
    )
    assert merged.corrupt == (
        CorruptReport("events", victim.name, items[-1].position, items[-1].reason),
    )


def test_a_bad_header_is_a_corrupt_entry_at_byte_0(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 60)
    _, files = list_segments(tmp_path)
    Path(files[0].path).write_bytes(b"not a segment file at all")
    stats = segment_stats(files[0])
    assert stats.records == 0
    assert stats.corrupt is not None and stats.corrupt.position == 0


def test_a_segment_deleted_after_listing_is_vanished_not_fatal(tmp_path: Path) -> None:
    write_log(tmp_path, "events", 60)
    _, files = list_segments(tmp_path)
    Path(files[0].path).unlink()  # retention ran between listing and the task
    stats = segment_stats(files[0])
    assert stats.vanished and stats.records == 0
    merged = merge_streams(["events"], [segment_stats(f) for f in files])["events"]
    assert merged.segments == len(files) - 1
    assert merged.vanished == (files[0].name,)


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


# ---------------------------------------------------------------------------
# Acceptance: the injector writes, spark-submit --master local[2] reads
# ---------------------------------------------------------------------------

TOPOLOGY = """
[streams.events]
[streams.clicks]
[streams.out]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key", clicks = "key" }
outputs = ["out"]
"""
CYCLES = 3
EVENTS_PER_CYCLE = (12, 100)  # requests, records per request
CLICKS_PER_CYCLE = (6, 40)


@dataclass
class InjectedLog:
    log_dir: Path
    acked: dict[str, int]
    """Records the injector acknowledged, per stream."""
    acked_sealed: dict[str, int]
    """... of which in segments that were sealed afterwards."""


def java_major_version() -> int:
    """The major version of the ``java`` Spark will use; fails the test if there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        pytest.fail(
            "spark-submit needs a Java 17+ runtime and none was found "
            f"(JAVA_HOME={java_home!r}, `java` on PATH: {shutil.which('java')!r}): install one, "
            "e.g. `apt-get install -y openjdk-17-jre-headless`"
        )
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if result.returncode != 0 or match is None:
        pytest.fail(f"`{java} -version` failed: {result.stderr or result.stdout}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


class Injector:
    """``millrace injector`` as a child process."""

    def __init__(self, deployment: Path, log_dir: Path, stderr_path: Path) -> None:
        self.command = [
            sys.executable, "-m", "millrace", "injector",
            "--deployment", str(deployment), "--log-dir", str(log_dir),
        ]  # fmt: skip
        self.stderr_path = stderr_path
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Injector:
        with open(self.stderr_path, "a") as stderr:
            self.process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("injector serving"), f"{line!r}; see {self.stderr_path}"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        assert self.process is not None and self.process.stdout is not None
        self.process.stdout.close()
        stop_gracefully(self.process, self.stderr_path)  # drains and closes its logs
        if exc_type is None:
            assert self.process.returncode == 0, f"injector exit {self.process.returncode}"


def seal_active_segment(stream_dir: Path, stream: str) -> None:
    """Roll the stream's active segment, as a writer with small segments would.

    The injector's ``[injector]`` settings have no segment size (64 MiB
    segments), so: reopen the closed log with a tiny ``segment_bytes`` and
    append a request without records, which seals the injector's segment
    (its ``.idx``) and starts a new one.
    """
    log = StreamLog.open(stream_dir, stream, config=LogConfig(segment_bytes=1))
    try:
        before = log.segments()
        log.append([AppendRequest(records=[])])
        after = log.segments()
    finally:
        log.close()
    assert len(after) == len(before) + 1 and after[-2].sealed


@pytest.fixture(scope="module")
def injected_log(tmp_path_factory: pytest.TempPathFactory) -> InjectedLog:
    """Three injector runs: ``events`` ends with 2 sealed segments and an active one full of
    records, ``clicks`` with 3 sealed segments and an active one without records."""
    root = tmp_path_factory.mktemp("injected")
    (root / "topology.toml").write_text(TOPOLOGY)
    port, node_port = free_port(), free_port()  # no node runs: forwarding keeps retrying
    deployment = root / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{port}"
[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{node_port}"
[sinks.out]
address = "127.0.0.1:{node_port}"
"""
    )
    log_dir = root / "log"
    rng = random.Random(11)
    acked = {"events": 0, "clicks": 0}
    acked_sealed = dict(acked)
    next_offset = dict(acked)
    plan = (("events", EVENTS_PER_CYCLE), ("clicks", CLICKS_PER_CYCLE))
    for cycle in range(CYCLES):
        with Injector(deployment, log_dir, root / "injector.stderr"):
            client = IngestClient(f"127.0.0.1:{port}", timeout_s=10)
            for stream, (requests, size) in plan:
                for number in range(requests):
                    records = [
                        (
                            f"k{rng.randrange(50)}".encode(),
                            f"{stream}-{cycle}-{number}-{i}".encode(),
                            T0 + cycle * 60_000 + rng.randrange(-30_000, 30_000),
                        )
                        for i in range(size)
                    ]
                    response = client.ingest(
                        stream, records, idempotency_key=f"{stream}-{cycle}-{number}"
                    )
                    assert response.first_offset == next_offset[stream]
                    assert len(response.record_ids) == size
                    next_offset[stream] += size
                    acked[stream] += size
            client.close()
        for stream in ("events", "clicks"):
            if stream == "clicks" or cycle < CYCLES - 1:
                seal_active_segment(log_dir / stream, stream)
                acked_sealed[stream] = acked[stream]
    return InjectedLog(log_dir, acked, acked_sealed)


def spark_submit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the job with the venv's real ``spark-submit --master local[2]``."""
    major = java_major_version()
    assert major >= 17, f"Spark 4 needs Java 17+, found Java {major}"
    assert SPARK_SUBMIT.exists(), f"{SPARK_SUBMIT} missing: is pyspark installed in the venv?"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,  # driver and executors: this venv's Python
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",  # CI hostnames may not resolve
    }
    for variable in ("SPARK_HOME", "PYSPARK_DRIVER_PYTHON_OPTS", "PYTHONPATH", "SPARK_CONF_DIR"):
        env.pop(variable, None)  # the venv's pyspark, and nothing from the repo on the path
    command = [
        str(SPARK_SUBMIT), "--master", "local[2]", "--driver-memory", "512m",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.local.dir={cwd}",
        str(JOB), *args,
    ]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, cwd=cwd, timeout=300
    )
    (cwd / "spark-submit.stderr").write_text(result.stderr)
    return result


def parse_lines(stdout: str, kind: str) -> list[dict[str, str]]:
    """The ``key=value`` fields of every ``<kind> ...`` line (``reason`` runs to the end)."""
    parsed = []
    for line in stdout.splitlines():
        if line.startswith(kind + " "):
            head, _, reason = line[len(kind) + 1 :].partition(" reason=")
            fields = dict(item.split("=", 1) for item in head.split())
            if reason:
                fields["reason"] = reason
            parsed.append(fields)
    return parsed


def check_stats(line: dict[str, str], data: dict[str, Any], expected: dict[str, Any]) -> None:
    """A stream's ``STATS`` line and its ``--json`` entry against the log's own numbers."""

    def ms(value: int | None) -> str:
        return "none" if value is None else str(value)

    assert line == {
        "stream": expected["stream"],
        "records": str(expected["records"]),
        "min_event_ms": ms(expected["min_event_ms"]),
        "max_event_ms": ms(expected["max_event_ms"]),
        "segments": str(expected["segments"]),
        "corrupt": "0",
    }
    assert data["records"] == expected["records"] == expected["held"]
    assert (data["min_ingest_ms"], data["max_ingest_ms"]) == (
        expected["min_ingest_ms"],
        expected["max_ingest_ms"],
    )


@pytest.mark.slow
def test_spark_job_counts_match_the_injectors_log(
    injected_log: InjectedLog, tmp_path: Path
) -> None:
    log_dir = injected_log.log_dir
    out = tmp_path / "stats.json"
    result = spark_submit("--log-dir", str(log_dir), "--json", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-5000:]
    stats = {fields["stream"]: fields for fields in parse_lines(result.stdout, "STATS")}
    assert sorted(stats) == ["clicks", "events"]
    assert parse_lines(result.stdout, "CORRUPT") == []
    assert "stream" in result.stdout and "segments" in result.stdout  # the table
    report = json.loads(out.read_text())
    assert report["spark_tasks"] == len(report["segments"]) == (CYCLES - 1) + CYCLES
    for stream in ("events", "clicks"):
        infos, records = log_view(log_dir / stream, stream)
        sealed = [info for info in infos if info.sealed]
        assert len(sealed) == (CYCLES - 1 if stream == "events" else CYCLES)
        expected = expected_stats(stream, sealed, records)
        # The injector's own count: what it acknowledged into the now-sealed segments.
        assert expected["records"] == injected_log.acked_sealed[stream]
        check_stats(stats[stream], report["streams"][stream], expected)
        per_segment = [s for s in report["segments"] if s["stream"] == stream]
        assert [
            (s["path"], s["records"], s["min_event_ms"], s["max_event_ms"]) for s in per_segment
        ] == [(i.path, i.records, i.min_event_ms, i.max_event_ms) for i in sealed]
        assert all(s["sealed"] and s["corrupt"] is None for s in per_segment)


@pytest.mark.slow
def test_spark_job_reports_corruption_and_reads_active_segments(
    injected_log: InjectedLog, tmp_path: Path
) -> None:
    log_dir = tmp_path / "log"
    shutil.copytree(injected_log.log_dir, log_dir)
    infos, records = log_view(log_dir / "events", "events")
    victim = Path(infos[1].path)
    assert infos[1].sealed and infos[1].records > 0
    flip_byte_mid_file(victim)
    items = list(scan_segment(victim, "events"))
    corrupt = items[-1]
    assert isinstance(corrupt, CorruptEntry)
    survivors = len(items) - 1
    assert survivors < infos[1].records

    out = tmp_path / "stats.json"
    result = spark_submit(
        "--log-dir", str(log_dir), "--stream", "events", "--stream", "clicks",
        "--include-active", "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-5000:]
    assert parse_lines(result.stdout, "CORRUPT") == [
        {"stream": "events", "segment": victim.name, "position": str(corrupt.position),
         "reason": corrupt.reason},
    ]  # fmt: skip
    stats = {fields["stream"]: fields for fields in parse_lines(result.stdout, "STATS")}
    report = json.loads(out.read_text())
    assert report["spark_tasks"] == len(report["segments"]) == 2 * CYCLES + 1

    # events: every segment read (the active one too); the damaged one up to its corrupt entry.
    events = stats["events"]
    assert int(events["segments"]) == len(infos) == CYCLES
    assert int(events["corrupt"]) == 1
    assert int(events["records"]) == injected_log.acked["events"] - infos[1].records + survivors
    assert report["streams"]["events"]["corrupt"] == 1
    [damaged] = [s for s in report["segments"] if s["path"] == str(victim)]
    assert damaged["records"] == survivors
    assert damaged["corrupt"] == {"position": corrupt.position, "reason": corrupt.reason}
    intact = [r for r in records if not infos[1].base_offset <= r.offset < infos[1].end_offset]
    assert min(r.event_time_ms for r in intact) >= int(events["min_event_ms"])
    assert max(r.event_time_ms for r in intact) <= int(events["max_event_ms"])

    # clicks: with its active segment (a COMMIT without records), all the injector acked.
    infos, records = log_view(log_dir / "clicks", "clicks")
    assert not infos[-1].sealed and infos[-1].records == 0
    expected = expected_stats("clicks", infos, records)
    assert expected["records"] == injected_log.acked["clicks"] == len(records)
    check_stats(stats["clicks"], report["streams"]["clicks"], expected)


@pytest.mark.slow
def test_spark_job_exits_2_for_a_missing_stream(injected_log: InjectedLog, tmp_path: Path) -> None:
    result = spark_submit("--log-dir", str(injected_log.log_dir), "--stream", "nope", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-5000:]
    # spark-submit passes the Python driver's stderr on through its own stdout.
    assert "log_stats: no stream 'nope'" in result.stdout + result.stderr
    assert "STATS" not in result.stdout
