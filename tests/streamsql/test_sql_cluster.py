"""SQL on a real cluster (slow): ``millrace sql`` writes the topology and a deployment
of every Nexmark query that runs as SQL (q2, q4, q8, q11 and a HAVING query under CI,
whose suite is bounded), ``millrace up`` runs it (injector, one node per computation,
file sinks: separate processes), ``millrace inject --finish`` pushes the Nexmark
streams, and each sink holds exactly the answer computed in plain Python; then
``millrace backfill`` (``spark-submit``) runs the same topology over the injector's log
and writes the same records, id for id (a join's rows by content: which record of a
pair makes a match differs between the two, docs/spark.md; an updating result by the
table it leaves)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import tomli_w

from examples.nexmark.events import generate
from millrace.local_cluster import start, stop
from millrace.sinks import read_sink_records
from tests.streamsql._nexmark_answers import QUERIES, UPDATING, answer, of, result, rows
from tests.streamsql.test_nexmark_sql import SQL
from tests.support import ROOT, free_port, wait_until

HOT = """
CREATE TABLE hot (auction BIGINT, bids BIGINT, top BIGINT, ws TIMESTAMP(3))
    WITH ('stream' = 'hot');
INSERT INTO hot
SELECT auction, COUNT(*), MAX(price), window_start
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end
HAVING COUNT(*) >= 3;
"""
ON_CLUSTER = ("q2", "q4", "q8", "q11") if os.environ.get("CI") else QUERIES
JOINS = frozenset({"q3", "q5", "q7", "q8"})
"""Queries whose rows a join makes: compared by content with the backfill's."""


def millrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", *args], capture_output=True, text=True, cwd=cwd,
        check=False, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip


def sink_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in read_sink_records(path)] if path.exists() else []


def hot_auctions(events: list[Any]) -> list[str]:
    windows: dict[tuple[int, int], list[int]] = {}
    for b in of("bids", events):
        start = b["dateTime"] - b["dateTime"] % 10_000
        windows.setdefault((b["auction"], start), []).append(b["price"])
    return rows([{"auction": a, "bids": len(p), "top": max(p), "ws": s}
                 for (a, s), p in windows.items() if len(p) >= 3])  # fmt: skip


def write_deployment(tmp_path: Path) -> None:
    """The deployment ``millrace sql`` wrote, on free ports, with an archive."""
    deployment = tomllib.loads((tmp_path / "deployment.toml").read_text())
    for section in (deployment["injector"], *deployment["nodes"].values(),
                    *deployment["sinks"].values()):  # fmt: skip
        section["address"] = f"127.0.0.1:{free_port()}"  # not the fixed ports it wrote
    deployment["injector"]["archive_uri"] = (tmp_path / "archive").as_uri()
    (tmp_path / "deployment.toml").write_text(tomli_w.dumps(deployment))


@pytest.mark.slow
def test_sql_runs_on_a_cluster_and_its_backfill_writes_the_same_records(tmp_path: Path) -> None:
    events = generate()
    queries = "".join(
        (SQL / f"{q}.sql").read_text().replace("'stream' = 'out'", f"'stream' = '{q}'")
        for q in ON_CLUSTER
    )
    (tmp_path / "pipeline.sql").write_text((SQL / "ddl.sql").read_text() + queries + HOT)
    planned = millrace("sql", "pipeline.sql", "--topology", "topology.toml",
                       "--write-deployment", "deployment.toml", cwd=tmp_path)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    write_deployment(tmp_path)
    for stream in ("bids", "persons", "auctions"):
        lines = [json.dumps({"key": "", "value": v, "ts": v["dateTime"]})
                 for s, v in events if s == stream]  # fmt: skip
        (tmp_path / f"{stream}.jsonl").write_text("\n".join(lines) + "\n")
    expected = {q: answer(q, events) for q in ON_CLUSTER}
    expected["hot"] = hot_auctions(events)
    assert all(expected.values())

    def result_of(stream: str, values: list[dict[str, Any]]) -> Any:
        return rows(values) if stream == "hot" else result(stream, values)

    out = tmp_path / "out"
    processes: list[subprocess.Popen[str]] = []
    try:
        up = ("up", "--config", "deployment.toml", "--data-dir", str(tmp_path / "data"))
        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up.log",
                               cwd=tmp_path))  # fmt: skip
        for stream in ("persons", "auctions", "bids"):
            injected = millrace("inject", "--config", "deployment.toml", "--stream", stream,
                                "--finish", f"{stream}.jsonl", cwd=tmp_path)  # fmt: skip
            assert injected.returncode == 0, injected.stdout + injected.stderr
        wait_until(
            lambda: all(result_of(s, sink_rows(out / f"{s}.jsonl")) == v
                        for s, v in expected.items()),
            180, "every query's answer in its sink",
        )  # fmt: skip
    finally:
        stop(processes)

    backfill = millrace("backfill", "--config", "deployment.toml", "--out", str(tmp_path / "bf"),
                      "--log", str(tmp_path / "data" / "log"), cwd=tmp_path)  # fmt: skip
    assert backfill.returncode == 0, backfill.stdout + backfill.stderr[-4000:]
    for stream, answered in expected.items():
        online = {r.record_id: (r.key, r.value, r.event_time_ms)
                  for r in read_sink_records(out / f"{stream}.jsonl")}  # fmt: skip
        table = pq.read_table(tmp_path / "bf" / stream).to_pylist()
        batch = {r["record_id"]: (r["key"], r["value"], r["event_time_ms"]) for r in table}
        if stream in UPDATING:  # an updating result's rows follow the order updates come in
            values = [json.loads(v) for _, v, _ in batch.values()]
            assert result_of(stream, values) == answered
        elif stream in JOINS:
            assert sorted(batch.values()) == sorted(online.values())
        else:
            assert batch == online
