"""A JSON-lines sink whose file system fills up while records flow, then frees up.

Issue 14: before, a failed write left buffered bytes that were written later
(a torn line in the middle, records doubled), the failed batch was resent
and written again, and the sink could not restart over the malformed line.
Now a failed write is cut back at once, nothing of it is acknowledged, the
sink stays up answering ``UNAVAILABLE`` with a reason, and once space returns
every record is in the file exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from millrace.computations import IntervalId, Topology
from millrace.sinks import FileSink, SinkUnavailableError, read_sink_file
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.disk_full.small_disk import small_disk
from tests.support import (
    ROOT,
    NodeProcess,
    SourceDriver,
    forwarding_deployment,
    free_port,
    wait_quiescent,
)


def records(start: int, count: int) -> list[record_pb2.Record]:
    return [
        record_pb2.Record(record_id=f"r{i:07d}".encode(), key=f"k{i % 13}".encode(),
                          value=json.dumps(i).encode(), event_time_ms=i, stream="in")
        for i in range(start, start + count)
    ]  # fmt: skip


def test_a_failed_write_is_cut_back_and_refused_until_space_returns(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", size_mb=1) as disk:
        path = disk.path / "out.jsonl"
        sink = FileSink(path)
        first = delivery_pb2.DeliveryBatch(batch_seq=1, records=records(0, 10))
        assert len(sink.write(first).committed_ids) == 10
        size = path.stat().st_size
        disk.fill()
        big = delivery_pb2.DeliveryBatch(batch_seq=2, records=records(10, 2000))
        with pytest.raises(SinkUnavailableError, match="No space left on device"):
            sink.write(big)
        assert path.stat().st_size == size, "nothing of the failed batch is left in the file"
        with pytest.raises(SinkUnavailableError):
            sink.write(big)  # still full: still refused, still nothing kept
        disk.free()
        ack = sink.write(big)
        assert len(ack.committed_ids) == 2000 and not ack.duplicate_ids
        sink.close()
        values = [int(line["value"]) for line in read_sink_file(path)]
        assert values == list(range(2010))
        assert FileSink(path).malformed_lines == 0


@pytest.mark.slow
def test_sink_process_rides_out_a_full_disk_exactly_once(tmp_path: Path) -> None:
    node_port, sink_port = free_port(), free_port()
    with small_disk(tmp_path / "disk", size_mb=4) as disk:
        out = disk.path / "ok.jsonl"
        deployment = forwarding_deployment(
            tmp_path, node_port, f"127.0.0.1:{sink_port}", f'path = "{out}"'
        )
        command = [sys.executable, "-m", "millrace", "sink", "--deployment", str(deployment),
                   "--stream", "ok"]  # fmt: skip

        def start_sink() -> subprocess.Popen[str]:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("sink ok serving"), line
            return process

        sink = start_sink()
        node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
        node.start()
        driver = SourceDriver(
            Topology.load(tmp_path / "topology.toml"),
            "in",
            {IntervalId("fwd", 0): f"127.0.0.1:{node_port}"},
        )
        total = 12_000
        try:
            driver.send(records(0, 2_000))
            wait_for_lines(out, 2_000)
            disk.fill()
            for start in range(2_000, total, 1_000):
                driver.send(records(start, 1_000))
            time.sleep(2.0)  # the node keeps resending; the sink keeps refusing
            assert sink.poll() is None, "the sink stays up while its disk is full"
            status = deliver_directly(sink_port)
            assert status.code() == grpc.StatusCode.UNAVAILABLE
            assert "No space left on device" in (status.details() or "")
            assert "refusing records" in (status.details() or "")
            disk.free()
            wait_for_lines(out, total)
            wait_quiescent([f"127.0.0.1:{node_port}"], 60)  # nothing left to resend: final
            values = sorted(int(line["value"]) for line in read_sink_file(out))
            assert values == list(range(total)), "every record exactly once"
            assert out.read_bytes().count(b"\n") == total, "no torn or malformed line"
            sink.send_signal(signal.SIGKILL)
            sink.wait()
            sink = start_sink()  # restarts over the file as it is
            assert sorted(int(line["value"]) for line in read_sink_file(out)) == values
        finally:
            driver.stop()
            node.terminate()
            sink.terminate()
            sink.wait()


def wait_for_lines(path: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(read_sink_file(path)) >= count:
            return
        time.sleep(0.1)
    have = len(read_sink_file(path)) if path.exists() else 0
    raise AssertionError(f"{path} holds {have} records, expected {count}")


def deliver_directly(port: int) -> grpc.RpcError:
    """One fresh batch straight to the sink; the error it ends with."""
    batch = delivery_pb2.DeliveryBatch(batch_seq=1, records=records(10**6, 50))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        acks = delivery_pb2_grpc.DeliveryStub(channel).Deliver(iter([batch]), timeout=10)
        list(acks)
    except grpc.RpcError as error:
        return error
    finally:
        channel.close()
    raise AssertionError("the sink acknowledged a batch on a full disk")
