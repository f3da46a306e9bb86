"""``spark_jobs/backfill.py`` under the real ``spark-submit --master local[2]`` (slow),
reading the log through a ``file://`` archive: its sink outputs equal the online run's,
record for record and id for id, at partition and interval counts unlike the
topology's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from millrace.injector.archive import ArchiveLocation, LogArchiver
from millrace.injector.log import StreamLog
from millrace.sinks import read_sink_file, read_sink_records
from tests.spark_backfill._topologies import (
    TWO_STAGES,
    harness_outputs,
    log_records,
    two_stages,
    write_log,
)
from tests.support import ROOT

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
JOB = ROOT / "spark_jobs" / "backfill.py"

DEPLOYMENT = """
topology = "topology.toml"
[injector]
address = "127.0.0.1:1"
archive_uri = "{archive}"
[nodes.count]
computation = "count"
intervals = [0, 1]
address = "127.0.0.1:2"
[nodes.total]
computation = "total"
intervals = [0, 1, 2]
address = "127.0.0.1:3"
[sinks.totals]
address = "127.0.0.1:4"
"""


def archive(log_dir: Path, uri: str) -> None:
    log = StreamLog.open(log_dir / "events", "events", read_only=True)
    try:
        archiver = LogArchiver(ArchiveLocation(uri), lambda: {"events": log}, clock=lambda: 0)
        archiver.load()
        archiver.run_once()
    finally:
        log.close()


def submit(
    deployment: Path, out: Path, *extra: str, cli: bool = False
) -> subprocess.CompletedProcess[str]:
    """The job under spark-submit, or through ``millrace backfill`` (which builds that)."""
    head = (
        [sys.executable, "-m", "millrace", "backfill"]
        if cli
        else [str(SPARK_SUBMIT), "--master", "local[2]", str(JOB)]
    )
    return subprocess.run(
        [*head, "--config", str(deployment), "--out", str(out), *extra],
        check=False, capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.slow
def test_backfill_equals_the_online_run(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    write_log(log_dir, 4000)
    uri = (tmp_path / "archive").as_uri()
    archive(log_dir, uri)
    (tmp_path / "topology.toml").write_text(TWO_STAGES)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(DEPLOYMENT.format(archive=uri))

    sealed = ArchiveLocation(uri).entries("events")
    records = log_records(log_dir)[: sealed[-1].end_offset]  # what the archive holds
    online = harness_outputs(two_stages(), records)["totals"]
    assert len(online) > 10
    expected = {rid: (r.key, r.value, r.event_time_ms) for rid, r in online.items()}

    # One run through millrace backfill (which builds the spark-submit command), at a
    # partition and interval count unlike the topology's; other counts: test_stages.py.
    out = tmp_path / "out0"
    result = submit(deployment, out, "--partitions", "3", "--intervals", "4", "--jsonl", cli=True)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    assert f"OUTPUT stream=totals records={len(expected)}" in result.stdout
    assert " INFO " not in result.stderr, "Spark's start-up noise is quiet by default"
    table = pq.read_table(out / "totals")
    got = {
        row["record_id"]: (row["key"], row["value"], row["event_time_ms"])
        for row in table.to_pylist()
    }
    assert got == expected
    [part] = (tmp_path / "out0" / "totals.jsonl").glob("part-*")
    lines = read_sink_file(part)
    assert {
        r.record_id: (r.key, r.value, r.event_time_ms) for r in read_sink_records(part)
    } == expected
    seqs = [line["seq"] for line in lines]  # one producing computation: its production order
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_a_missing_log_is_one_clear_message(tmp_path: Path) -> None:
    (tmp_path / "topology.toml").write_text(TWO_STAGES)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(DEPLOYMENT.format(archive=(tmp_path / "nothing").as_uri()))
    # The job checks its inputs before Spark starts: run its driver without spark-submit.
    result = subprocess.run(
        [sys.executable, str(JOB), "--config", str(deployment), "--out", str(tmp_path / "out"),
         "--log", str(tmp_path / "no-log")],
        check=False, capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 2
    assert "no log directory" in result.stderr + result.stdout


def driver(deployment: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The job's driver without spark-submit: what it decides before Spark starts."""
    return subprocess.run(
        [sys.executable, str(JOB), "--config", str(deployment), "--out", str(out), *extra],
        check=False, capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_a_backfill_that_would_read_nothing_says_why_and_fails(tmp_path: Path) -> None:
    """Issue 31: a backfill of a short run read 0 records (the log was one active
    segment) and exited 0 with empty outputs, after minutes of Spark."""
    log_dir = tmp_path / "log"
    write_log(log_dir, 300, segment_bytes=10**9)  # one active segment
    (tmp_path / "topology.toml").write_text(TWO_STAGES)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(DEPLOYMENT.format(archive=(tmp_path / "archive").as_uri()))
    writer = StreamLog.open(log_dir / "events", "events")  # an injector writing it
    try:
        result = driver(deployment, tmp_path / "out", "--log", str(log_dir))
    finally:
        writer.close()
    assert result.returncode == 3, result.stderr
    assert "active segments an injector is writing (events)" in result.stderr
    assert "--include-active" in result.stderr
    result = driver(deployment, tmp_path / "out", "--log", str(log_dir), "--to", "1000")
    assert result.returncode == 3, result.stderr
    assert "no record of events has an event time in [-inf, 1000)" in result.stderr


@pytest.mark.slow
def test_a_stopped_injectors_active_segment_is_read(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    write_log(log_dir, 300, segment_bytes=10**9)  # one active segment, no writer
    (tmp_path / "topology.toml").write_text(TWO_STAGES)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(DEPLOYMENT.format(archive=(tmp_path / "archive").as_uri()))
    result = submit(deployment, tmp_path / "out", "--log", str(log_dir))
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    assert "BACKFILL records_read=300 " in result.stdout
