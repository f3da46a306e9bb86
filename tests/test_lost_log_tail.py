"""Record ids are never reused when the log loses acknowledged records at its end.

Issue 14: an injector whose active segment lost its tail (disk damage, a
restored backup) or was deleted started anyway and numbered new records from
the log's end, so new records got the ids of records the first computation
had already acknowledged, and the node dropped them as duplicates, silently.
Now it refuses to start, naming the stream, the lost offsets and the fix.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from millrace.injector.client import IngestClient
from tests.support import (
    ROOT,
    CollectingSink,
    InjectorProcess,
    NodeProcess,
    free_port,
    wait_until,
)
from tests.test_node_metrics import scrape

pytestmark = pytest.mark.slow


def deployment_file(tmp_path: Path, injector: int, node: int, sink: str, metrics: int) -> Path:
    (tmp_path / "topology.toml").write_text(
        """
[streams.in]
[streams.ok]
[computations.fwd]
handler = "tests.workloads:Poison"
inputs = { in = "key" }
outputs = ["ok"]
"""
    )
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{injector}"
metrics_port = {metrics}
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{node}"
[sinks.ok]
address = "{sink}"
"""
    )
    return path


@pytest.mark.parametrize("damage", ["tail cut", "active segment deleted"])
def test_the_injector_refuses_to_reuse_acknowledged_offsets(tmp_path: Path, damage: str) -> None:
    ports = {name: free_port() for name in ("injector", "node", "metrics")}
    sink = CollectingSink()
    deployment = deployment_file(
        tmp_path, ports["injector"], ports["node"], sink.address, ports["metrics"]
    )
    log_dir = tmp_path / "log"
    injector = InjectorProcess(deployment, log_dir, tmp_path / "injector.log")
    injector.start()
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.start()
    try:
        client = IngestClient(f"127.0.0.1:{ports['injector']}", timeout_s=5)
        for n in range(15):
            client.ingest("in", [(b"k", f"v{n}".encode(), n)], idempotency_key=f"r{n}")
        client.close()
        wait_until(lambda: len(sink.records) == 15, 30, "15 records at the sink")
        injector.terminate()  # forwarded.json: the node acknowledged offsets 0..14
        [segment] = sorted((log_dir / "in").glob("segment-*.log"))
        if damage == "tail cut":
            size = segment.stat().st_size
            os.truncate(segment, size - (size - 32) // 2)  # about half the entries gone
        else:
            segment.unlink()
        with pytest.raises(RuntimeError, match="did not start"):
            injector.start()
        assert injector.process is not None and injector.process.wait(10) == 2
        message = (tmp_path / "injector.log").read_text()
        assert "acknowledged every offset below 15" in message
        assert "were lost from the log's end" in message
        assert "restore the missing segment files from a backup" in message
        assert "millrace log accept-loss" in message
        # Without a backup: accept the loss; the log goes on above offset 15.
        accept = millrace("log", "accept-loss", "--dir", str(log_dir), "--stream", "in")
        assert accept.returncode == 0, accept.stderr
        found = re.search(r"offsets (\d+)\.\.14", accept.stdout)
        assert found is not None, accept.stdout
        lost_from = int(found.group(1))
        assert lost_from == 0 if damage == "active segment deleted" else 0 < lost_from < 15
        assert f"..14 ({15 - lost_from} records) recorded as lost" in accept.stdout
        injector.start()
        client = IngestClient(f"127.0.0.1:{ports['injector']}", timeout_s=5)
        response = client.ingest("in", [(b"k", b"new", 99)] * 3, idempotency_key="after")
        client.close()
        assert response.first_offset == 15, "no record id is used twice"
        wait_until(lambda: len(sink.records) == 18, 30, "the new records at the sink")
        assert sum(1 for record in sink.records.values() if record.value == b"new") == 3
        segments = millrace("log", "segments", "--dir", str(log_dir))
        assert f"in: offsets {lost_from}..14 lost ({15 - lost_from} records)" in segments.stdout
        assert scrape(ports["metrics"])["millrace_log_lost_records"] == 15 - lost_from
    finally:
        node.terminate()
        injector.kill()
        sink.stop()


def millrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
