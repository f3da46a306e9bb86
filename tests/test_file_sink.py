"""The exactly-once file sink: duplicates, torn lines, and SIGKILLs of the sink process."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from millrace.computations import IntervalId, Topology
from millrace.sinks import FileSink, file_sink, read_sink_file, sink_line
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.support import (
    ROOT,
    NodeProcess,
    SourceDriver,
    forwarding_deployment,
    free_port,
    wait_quiescent,
)


def batch(seq: int, ids: list[int]) -> delivery_pb2.DeliveryBatch:
    return delivery_pb2.DeliveryBatch(
        batch_seq=seq,
        records=[
            record_pb2.Record(record_id=i.to_bytes(16, "big"), key=b"k", value=str(i).encode())
            for i in ids
        ],
    )


def test_each_record_is_written_once_across_reopen_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink = FileSink(path)
    ack = sink.write(batch(1, [1, 2, 2, 3]))
    assert len(ack.committed_ids) == 3 and len(ack.duplicate_ids) == 1
    sink.close()
    with open(path, "ab") as handle:
        handle.write(b'{"record_id": "00')  # a crash mid-line
    sink = FileSink(path)
    assert sink.truncated_bytes > 0
    ack = sink.write(batch(2, [3, 4]))
    assert [int.from_bytes(r, "big") for r in ack.duplicate_ids] == [3]
    sink.write(delivery_pb2.DeliveryBatch(batch_seq=3, records=[
        record_pb2.Record(record_id=b"\x09" * 16, key=b"\xff", value=b"\xfe")
    ]))  # fmt: skip
    sink.close()
    lines = read_sink_file(path)
    assert [line["value"] for line in lines[:4]] == [1, 2, 3, 4]  # JSON values as JSON
    assert lines[4]["key"] == {"base64": "/w=="}


@pytest.mark.parametrize("read_bytes", [1, 7, 64, 1 << 20])
def test_a_reopened_sink_indexes_its_file_read_in_pieces(
    tmp_path: Path, read_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines straddling the reads at start-up: the same records, positions and latest
    values as written; a malformed line skipped; a torn last line cut."""
    path = tmp_path / "out.jsonl"
    sink = FileSink(path)
    for seq in range(1, 6):
        sink.write(batch(seq, list(range(10 * seq, 10 * seq + 7))))
    sink.close()
    with open(path, "ab") as handle:
        handle.write(b"not a record\n")
    good = sink_line(record_pb2.Record(record_id=b"\x01" * 16, key=b"j", value=b"last"))
    with open(path, "ab") as handle:
        handle.write(good + b'{"record_id": "0')  # and a crash mid-line
    monkeypatch.setattr(file_sink, "RECOVER_READ_BYTES", read_bytes)
    sink = FileSink(path)
    assert (sink.truncated_bytes, sink.malformed_lines, len(sink)) == (16, 1, 36)
    assert [r.value for _, r in sink.read(0, 100)] == [
        *(str(i).encode() for seq in range(1, 6) for i in range(10 * seq, 10 * seq + 7)),
        b"last",
    ]
    assert sink.latest(b"k") == (34, sink.read(34, 1)[0][1])
    assert sink.latest(b"j") == (35, sink.read(35, 1)[0][1])
    assert len(sink.write(batch(9, [10, 56, 99])).duplicate_ids) == 2
    sink.close()


@pytest.mark.slow
def test_sink_process_survives_sigkill_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(3)
    node_port, sink_port = free_port(), free_port()
    deployment = forwarding_deployment(
        tmp_path, node_port, f"127.0.0.1:{sink_port}", 'path = "out/ok.jsonl"'
    )
    command = [
        sys.executable,
        "-m",
        "millrace",
        "sink",
        "--deployment",
        str(deployment),
        "--stream",
        "ok",
    ]

    def start_sink() -> subprocess.Popen[str]:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert process.stdout is not None
        assert process.stdout.readline().startswith("sink ok serving")
        return process

    sink = start_sink()
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.start()
    driver = SourceDriver(
        Topology.load(tmp_path / "topology.toml"),
        "in",
        {IntervalId("fwd", 0): f"127.0.0.1:{node_port}"},
    )
    total = 20_000
    try:
        records = [
            record_pb2.Record(record_id=f"r{i:07d}".encode(), key=f"k{i % 13}".encode(),
                              value=json.dumps(i).encode(), event_time_ms=i, stream="in")
            for i in range(total)
        ]  # fmt: skip
        for start in range(0, total, 1000):
            driver.send(records[start : start + 1000])
            if start % 4000 == 0:
                time.sleep(rng.uniform(0.05, 0.2))
                sink.send_signal(signal.SIGKILL)
                sink.wait()
                sink = start_sink()
        deadline = time.monotonic() + 60
        path = tmp_path / "out" / "ok.jsonl"
        while time.monotonic() < deadline:
            if path.exists() and len(read_sink_file(path)) >= total:
                break
            time.sleep(0.1)
        wait_quiescent([f"127.0.0.1:{node_port}"], 60)  # nothing left to resend: final
        values = sorted(int(line["value"]) for line in read_sink_file(path))
        assert values == list(range(total)), "every record exactly once"
    finally:
        driver.stop()
        node.terminate()
        sink.terminate()
        sink.wait()
