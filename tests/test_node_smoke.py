"""A node in real processes over real gRPC: deliver, commit, ack, produce to a sink."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from millrace.computations import IntervalId, Topology
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.support import CollectingSink, NodeProcess, SourceDriver, free_port, wait_until

pytestmark = pytest.mark.slow


def write_cluster(tmp_path: Path, sink: str, port: int, max_attempts: int = 2) -> Path:
    (tmp_path / "topology.toml").write_text(
        f"""
[streams.in]
[streams.ok]

[computations.poison]
handler = "tests.workloads:Poison"
intervals = 2
inputs = {{ in = "key" }}
outputs = ["ok"]
max_attempts = {max_attempts}
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"

[nodes.p]
computation = "poison"
intervals = [0, 1]
address = "127.0.0.1:{port}"

[sinks.ok]
address = "{sink}"
"""
    )
    return deployment


def test_records_flow_exactly_once_and_poison_is_dead_lettered(tmp_path: Path) -> None:
    sink = CollectingSink()
    port = free_port()
    deployment = write_cluster(tmp_path, sink.address, port)
    node = NodeProcess(deployment, "p", tmp_path / "data", tmp_path)
    node.start()
    topology = Topology.load(tmp_path / "topology.toml")
    driver = SourceDriver(
        topology,
        "in",
        {
            IntervalId("poison", 0): f"127.0.0.1:{port}",
            IntervalId("poison", 1): f"127.0.0.1:{port}",
        },
    )
    try:
        records = [
            record_pb2.Record(
                record_id=f"r{i:05d}".encode(), key=f"k{i % 7}".encode(),
                value=b"poison" if i == 13 else json.dumps(i).encode(),
                event_time_ms=i, stream="in",
            )
            for i in range(500)
        ]  # fmt: skip
        driver.send(records)
        driver.send(records[100:150])  # duplicate deliveries
        wait_until(lambda: driver.unacked() == 0, 20, "every source record acked")
        wait_until(lambda: len(sink.records) == 499, 20, "499 records at the sink")
        assert sorted(sink.values()) == sorted(
            json.dumps(i).encode() for i in range(500) if i != 13
        )

        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        admin = admin_pb2_grpc.AdminStub(channel)
        letters = admin.ListDeadLetters(
            admin_pb2.ListDeadLettersRequest(computation="poison")
        ).dead_letters
        assert [letter.record.record_id for letter in letters] == [b"r00013"]
        assert "cannot digest" in letters[0].error
        state = admin.GetState(admin_pb2.GetStateRequest(computation="poison", key=b"k1"))
        assert state.found and state.entries[0].tag == "n"
        status = admin.Status(admin_pb2.StatusRequest())
        assert {i.interval.index for i in status.intervals} == {0, 1}
    finally:
        driver.stop()
        node.terminate()
        sink.stop()


def test_undecodable_and_oversized_messages_get_clear_statuses(tmp_path: Path) -> None:
    sink = CollectingSink()
    port = free_port()
    node = NodeProcess(
        write_cluster(tmp_path, sink.address, port), "p", tmp_path / "data", tmp_path
    )
    node.start()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        raw = channel.stream_stream(
            "/millrace.wire.v1.Delivery/Deliver",
            request_serializer=lambda b: b,
            response_deserializer=delivery_pb2.DeliveryAck.FromString,
        )
        with pytest.raises(grpc.RpcError) as undecodable:
            list(raw(iter([b"\xff\xff\xff\xff not a protobuf"]), timeout=10))
        assert undecodable.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "undecodable DeliveryBatch" in undecodable.value.details()

        stub = delivery_pb2_grpc.DeliveryStub(channel)
        huge = delivery_pb2.DeliveryBatch(batch_seq=1)
        huge.records.add(record_id=b"x", value=b"v" * (65 << 20), stream="in")
        with pytest.raises(grpc.RpcError) as oversized:
            list(stub.Deliver(iter([huge]), timeout=20))
        assert oversized.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        unknown = delivery_pb2.DeliveryBatch(batch_seq=2)
        unknown.target.computation = "poison"
        unknown.target.index = 0
        unknown.records.add(record_id=b"y", key=b"k", value=b"1", stream="nope")
        [ack] = list(stub.Deliver(iter([unknown]), timeout=10))
        assert ack.rejected[0].reason == delivery_pb2.UNKNOWN_STREAM
        assert "does not read stream 'nope'" in ack.rejected[0].message
    finally:
        node.terminate()
        sink.stop()
