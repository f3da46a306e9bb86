"""Big records end to end: ``millrace inject`` -> injector -> node -> ``millrace sink``.

Forty records of about 3.5 MiB each (ingest takes up to 4 MiB of key and value), all
real processes and gRPC. They wait for their receivers twice: injected before the node
starts, produced before the sink starts, so each sender holds a backlog of frames of two
records (a frame's budget is 8 MiB). Combined by record count alone such a backlog made
one message of ~140 MiB, which gRPC refuses, resent without end; every message must stay
below the 64 MiB limit, and every record reach the sink once, unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from millrace.local_cluster import start, stop
from millrace.sink_lines import parse_line
from tests.support import ROOT, free_port, wait_until

pytestmark = pytest.mark.slow

RECORDS = 40
VALUE_BYTES = 3_500_000

TOPOLOGY = """
[streams.events]
[streams.ok]

[computations.fwd]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
"""


def _sink_values(path: Path) -> dict[bytes, bytes]:
    if not path.exists():
        return {}
    lines = [parse_line(line) for line in path.read_bytes().splitlines(keepends=True)]
    return {line.key: line.value for line in lines if line is not None}


def test_records_of_megabytes_arrive_once_and_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the services import tests.workloads
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "fwd", "sink")}
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{ports["fwd"]}"
[sinks.ok]
address = "127.0.0.1:{ports["sink"]}"
path = "out/ok.jsonl"
"""
    )
    # Random hex, which RocksDB cannot compress: the node's store grows by what it keeps.
    sent = {f"k{i}".encode(): os.urandom(VALUE_BYTES // 2).hex().encode() for i in range(RECORDS)}
    lines = "".join(
        json.dumps({"key": key.decode(), "value": value.decode(), "event_time_ms": 1000 + i}) + "\n"
        for i, (key, value) in enumerate(sent.items())
    )
    (tmp_path / "big.jsonl").write_text(lines)
    config = str(deployment)
    processes = [
        start(["injector", "--config", config, "--log-dir", str(tmp_path / "log")],
              "injector serving", "injector", log=tmp_path / "injector.log", cwd=tmp_path)
    ]  # fmt: skip
    try:
        inject = [sys.executable, "-m", "millrace", "inject", "--config", config,
                  "--stream", "events", str(tmp_path / "big.jsonl")]  # fmt: skip
        done = subprocess.run(inject, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        node = ["node", "--config", config, "--name", "fwd", "--data-dir", str(tmp_path / "fwd")]
        processes.append(
            start(node, "node fwd serving", "fwd", log=tmp_path / "fwd.log", cwd=tmp_path)
        )
        data = tmp_path / "fwd"
        # Three quarters of the outputs committed (whatever RocksDB's compression takes off):
        # a backlog of 15 frames or more, ~100 MiB, waits for the sink.
        committed = 3 * RECORDS * VALUE_BYTES // 4
        wait_until(lambda: _stored_bytes(data) > committed, 120, "the node's commits")
        sink = ["sink", "--config", config, "--stream", "ok"]
        processes.append(start(sink, "sink ", "sink", log=tmp_path / "sink.log", cwd=tmp_path))
        out = tmp_path / "out" / "ok.jsonl"
        wait_until(lambda: len(_sink_values(out)) >= RECORDS, 120, "every record at the sink")
        assert _sink_values(out) == sent
        assert len(out.read_bytes().splitlines()) == RECORDS, "each record once"
    finally:
        stop(processes)


def _stored_bytes(directory: Path) -> int:
    """Bytes under ``directory``: the node's store, whose outbox keeps what it produced
    until the sink acknowledges it."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
