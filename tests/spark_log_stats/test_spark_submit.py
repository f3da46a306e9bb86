"""``spark_jobs/log_stats.py`` over a log a real injector wrote (slow): in the Spark
session the tests share, and under the real ``spark-submit --master local[2]``.

A real injector process writes the log; the job's numbers must equal the log's own:
the injector's acknowledgements and ``StreamLog.segments()``/``read()``."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millrace.injector.client import IngestClient
from millrace.injector.log import (
    AppendRequest,
    CorruptEntry,
    LogConfig,
    StreamLog,
    scan_segment,
)
from millrace.spark_jobs import log_stats
from tests.spark_log_stats._logs import (
    T0,
    expected_stats,
    flip_byte_mid_file,
    log_view,
)
from tests.spark_logsource._session import SPARK_SUBMIT, shared_spark, spark_env
from tests.support import ROOT, InjectorProcess, free_port

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

JOB = ROOT / "spark_jobs" / "log_stats.py"


@dataclass
class InjectedLog:
    log_dir: Path
    acked: dict[str, int]
    """Records the injector acknowledged, per stream."""


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
    next_offset = dict(acked)
    plan = (("events", EVENTS_PER_CYCLE), ("clicks", CLICKS_PER_CYCLE))
    for cycle in range(CYCLES):
        with InjectorProcess(deployment, log_dir, root / "injector.stderr"):
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
    return InjectedLog(log_dir, acked)


def spark_submit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the job with the venv's real ``spark-submit --master local[2]``."""
    major = java_major_version()
    assert major >= 17, f"Spark 4 needs Java 17+, found Java {major}"
    assert SPARK_SUBMIT.exists(), f"{SPARK_SUBMIT} missing: is pyspark installed in the venv?"
    command = [
        str(SPARK_SUBMIT), "--master", "local[2]", "--driver-memory", "512m",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.local.dir={cwd}",
        str(JOB), *args,
    ]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, env=spark_env(), cwd=cwd, timeout=300
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
def test_the_job_reports_corruption_and_reads_active_segments(
    injected_log: InjectedLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job's ``main`` in the session the Spark tests share; the same job under
    ``spark-submit``: the exit-status test below."""
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
    status = log_stats.main(
        ["--log-dir", str(log_dir), "--stream", "events", "--stream", "clicks",
         "--include-active", "--json", str(out)],
        spark=shared_spark(),
    )  # fmt: skip
    assert status == 0
    stdout = capsys.readouterr().out
    assert "stream" in stdout and "segments" in stdout  # the table
    assert parse_lines(stdout, "CORRUPT") == [
        {"stream": "events", "segment": victim.name, "position": str(corrupt.position),
         "reason": corrupt.reason},
    ]  # fmt: skip
    stats = {fields["stream"]: fields for fields in parse_lines(stdout, "STATS")}
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
