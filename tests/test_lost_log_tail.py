"""Record ids are never reused when the log loses acknowledged records at its end.

Issue 14: an injector whose active segment lost its tail (disk damage, a
restored backup) or was deleted started anyway and numbered new records from
the log's end, so new records got the ids of records the first computation
had already acknowledged, and the node dropped them as duplicates, silently.
Now it refuses to start, naming the stream, the lost offsets and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from injector.client import IngestClient
from tests.support import CollectingSink, InjectorProcess, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow


def deployment_file(tmp_path: Path, injector: int, node: int, sink: str) -> Path:
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
    ports = {name: free_port() for name in ("injector", "node")}
    sink = CollectingSink()
    deployment = deployment_file(tmp_path, ports["injector"], ports["node"], sink.address)
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
    finally:
        node.terminate()
        injector.kill()
        sink.stop()
