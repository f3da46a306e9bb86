"""The injector's log fills its file system, then space is freed: it recovers by itself.

Issue 14: before, the stream log stayed "failed" after one failed write and
refused every request until the injector was restarted by hand, while the
source watermark went on advancing (idle) past the records it refused. Now a
full disk is answered ``UNAVAILABLE`` with the reason, the watermark waits
for the refused records, and the same process appends again once space
returns: every record reaches the sink exactly once, offsets stay dense.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from millrace.injector.client import IngestClient
from millrace.injector.log import StreamLog
from millrace.wire.v1 import ingest_pb2, ingest_pb2_grpc, watermark_pb2, watermark_pb2_grpc
from tests.disk_full.small_disk import small_disk
from tests.support import CollectingSink, InjectorProcess, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow


def write_deployment(tmp_path: Path, injector: int, node: int, sink: str) -> Path:
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
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
authority = "127.0.0.1:{injector}"
[injector]
address = "127.0.0.1:{injector}"
out_of_orderness_ms = 100
idle_timeout_ms = 1000
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{node}"
[sinks.ok]
address = "{sink}"
"""
    )
    return deployment


def batch(first: int, count: int) -> list[tuple[bytes, bytes, int]]:
    return [(f"k{i % 7}".encode(), str(i).encode(), i) for i in range(first, first + count)]


def source_watermark(address: str) -> int:
    channel = grpc.insecure_channel(address)
    try:
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
        watch = stub.WatchWatermarks(
            watermark_pb2.WatchWatermarksRequest(computations=["source:in"]), timeout=5
        )
        snapshot = next(iter(watch))
        watch.cancel()
        return int(snapshot.updates[0].low_watermark_ms)
    finally:
        channel.close()


def test_the_injector_refuses_while_full_and_appends_again_when_freed(tmp_path: Path) -> None:
    ports = {name: free_port() for name in ("injector", "node")}
    address = f"127.0.0.1:{ports['injector']}"
    sink = CollectingSink()
    deployment = write_deployment(tmp_path, ports["injector"], ports["node"], sink.address)
    log_dir = tmp_path / "log"
    # Only the stream's own directory is on the small disk: the watermark journal is not,
    # so what the authority publishes meanwhile is visible.
    with small_disk(log_dir / "in", size_mb=4) as disk:
        injector = InjectorProcess(deployment, log_dir, tmp_path / "injector.log")
        injector.start()
        node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
        node.start()
        client = IngestClient(address, timeout_s=5)
        raw = ingest_pb2_grpc.IngestStub(grpc.insecure_channel(address))
        try:
            client.ingest("in", batch(0, 1_000), idempotency_key="a")
            wait_until(lambda: len(sink.records) == 1_000, 30, "batch a at the sink")
            pid = injector.pid
            disk.fill()
            refused = ingest_pb2.IngestRequest(
                stream="in",
                idempotency_key="b",
                records=[
                    ingest_pb2.IngestRecord(key=k, value=v, event_time_ms=ts)
                    for k, v, ts in batch(1_000, 1_000)
                ],
            )
            deadline = time.monotonic() + 3.0  # three idle timeouts
            while time.monotonic() < deadline:
                with pytest.raises(grpc.RpcError) as raised:
                    raw.Ingest(refused, timeout=5)
                assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "No space left on device" in (raised.value.details() or "")
                assert source_watermark(address) < 1_000, "never past the refused records"
                time.sleep(0.3)
            disk.free()
            response = raw.Ingest(refused, timeout=10)  # the same process, no restart
            assert response.first_offset == 1_000 and not response.replayed
            assert injector.pid == pid
            client.ingest("in", batch(2_000, 1_000), idempotency_key="c")
            wait_until(lambda: len(sink.records) == 3_000, 30, "every batch at the sink")
            time.sleep(0.5)
            assert sorted(int(v) for v in sink.values()) == list(range(3_000))
        finally:
            client.close()
            node.terminate()
            injector.terminate()
            sink.stop()
        with StreamLog.open(log_dir / "in", "in", read_only=True) as stream_log:
            logged = stream_log.read(0, 10_000)
        assert [r.offset for r in logged] == list(range(3_000)), "dense, each record once"
        assert [int(r.value) for r in logged] == list(range(3_000))
