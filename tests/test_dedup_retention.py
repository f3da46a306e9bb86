"""Record ids are never forgotten while a retry can still come (issue 14, defect 9).

A real node process (``fwd``: counts records per key in state ``n`` and
forwards them to a sink), fed by this test over real gRPC, resending records
with their original ids as a sender that never got its ack would:

- the node's wall clock steps hours forward and back (libfaketime; the
  monotonic clock untouched): every resend is a duplicate;
- the node is down longer than its dedup retention while the sender still
  holds the records unacknowledged (it reports its progress, as every
  Millrace sender does): every resend after the restart is a duplicate, and
  so is one after the retention has passed on the running node.

Afterwards the state counted each record once and the sink holds each once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import pytest

from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.support import (
    CollectingSink,
    NodeProcess,
    faketime_library,
    forwarding_deployment,
    free_port,
)
from tests.support import numbered_records as records

pytestmark = pytest.mark.slow


def deliver(
    port: int,
    seq: int,
    batch_records: list[record_pb2.Record],
    *,
    floor: int | None = None,
    first: int = 0,
) -> delivery_pb2.DeliveryAck:
    """One batch from source ``src`` (positions = record numbers when ``floor`` is given)."""
    batch = delivery_pb2.DeliveryBatch(batch_seq=seq, records=batch_records)
    batch.target.computation = "fwd"
    batch.target.index = 0
    batch.sender.sender_id = "src"
    if floor is not None:
        batch.sender.progress.sequence = "source:in"
        batch.sender.progress.floor = floor
        batch.sender.progress.first = first
        batch.sender.progress.last = first + len(batch_records) - 1
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        acks = list(delivery_pb2_grpc.DeliveryStub(channel).Deliver(iter([batch]), timeout=30))
    ack: delivery_pb2.DeliveryAck = acks[0]
    return ack


def counted(port: int) -> int:
    """Sum of the per-key counts in the node's state: records it committed."""
    total = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        for key in (b"k0", b"k1", b"k2"):
            response = stub.GetState(admin_pb2.GetStateRequest(computation="fwd", key=key))
            total += sum(int(json.loads(e.value)) for e in response.entries if e.tag == "n")
    return total


def test_a_wall_clock_step_never_makes_a_retry_look_new(tmp_path: Path) -> None:
    library = faketime_library()
    port, sink = free_port(), CollectingSink()
    deployment = forwarding_deployment(
        tmp_path, port, sink.address, computation_settings="", sink_settings=""
    )
    control = tmp_path / "faketime"
    control.write_text("+0\n")
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.env = {"LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": str(control),
                "FAKETIME_NO_CACHE": "1", "DONT_FAKE_MONOTONIC": "1"}  # fmt: skip
    node.start()
    try:
        ten = records(0, 10, keys=3)
        assert len(deliver(port, 1, ten).committed_ids) == 10
        assert len(deliver(port, 2, ten[3:4]).duplicate_ids) == 1
        for step in ("+7200", "-3600", "+86400"):  # two hours on, back, a day on
            control.write_text(f"{step}\n")
            ack = deliver(port, 3, ten[3:4])
            assert list(ack.duplicate_ids) == [ten[3].record_id], f"after {step} s"
        assert counted(port) == 10
        assert sorted(int(v) for v in sink.values()) == list(range(10))
    finally:
        node.terminate()
        sink.stop()


def test_a_receiver_down_past_its_retention_still_knows_what_its_sender_holds(
    tmp_path: Path,
) -> None:
    port, sink = free_port(), CollectingSink()
    deployment = forwarding_deployment(tmp_path, port, sink.address)
    text = deployment.read_text().replace(
        'computation = "fwd"\n', 'computation = "fwd"\ndedup_retention_ms = 1000\n'
    )
    deployment.write_text(text)
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.start()
    try:
        ten = records(0, 10, keys=3)
        # The sender holds 0..9 unacknowledged (its ack was lost): floor 0.
        assert len(deliver(port, 1, ten, floor=0).committed_ids) == 10
        node.kill()
        time.sleep(3.0)  # down three times its retention
        node.start()
        ack = deliver(port, 2, ten, floor=0)
        assert len(ack.duplicate_ids) == 10, "a restart forgets nothing a sender may resend"
        time.sleep(3.0)  # and up three times its retention, the sender still holding them
        deliver(port, 3, records(10, 5, keys=3), floor=0, first=10)  # a commit: collection
        ack = deliver(port, 4, ten, floor=0)
        assert len(ack.duplicate_ids) == 10, "past the retention, still held: still known"
        assert counted(port) == 15
        assert sorted(int(v) for v in sink.values()) == list(range(15))
    finally:
        node.terminate()
        sink.stop()
