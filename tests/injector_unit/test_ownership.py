"""Interval leases: fresh epochs per registration, durable across restarts, over gRPC."""

from __future__ import annotations

import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from computations._control_link import AssignmentWatch, register_intervals
from injector.control_service import ControlService
from injector.ownership import OwnershipRegistry
from millrace.wire.v1 import control_pb2, control_pb2_grpc
from tests.workloads import two_stage_topology


def test_each_registration_bumps_the_epoch_durably(tmp_path: Path) -> None:
    path = tmp_path / "ownership.json"
    registry = OwnershipRegistry(two_stage_topology(), path)
    [first] = registry.register("a", "counts", "127.0.0.1:1", [0])
    [second] = registry.register("b", "counts", "127.0.0.1:2", [0])
    assert (first.epoch, second.epoch) == (1, 2)
    reopened = OwnershipRegistry(two_stage_topology(), path)
    [third] = reopened.register("a", "counts", "127.0.0.1:1", [0])
    assert third.epoch == 3, "epochs are never reused after a restart"
    _, leases = reopened.leases(["counts"])
    assert [(lease.index, lease.node_id, lease.epoch) for lease in leases] == [(0, "a", 3)]
    with pytest.raises(ValueError, match="has no interval 7"):
        reopened.register("a", "counts", "x", [7])


def test_registration_and_supersession_over_grpc(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    control_pb2_grpc.add_ControlServicer_to_server(ControlService(registry), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    address = f"127.0.0.1:{port}"
    try:
        held = register_intervals(
            address, node_id="old", computation="counts", node_address="x", intervals=[0, 1]
        )
        assert held == {0: 1, 1: 1}
        superseded: list[tuple[int, int, str]] = []
        watch = AssignmentWatch(
            address,
            computation="counts",
            held=lambda: held,
            on_superseded=lambda i, e, owner: superseded.append((i, e, owner)),
        )
        watch.start()
        newer = register_intervals(
            address, node_id="new", computation="counts", node_address="y", intervals=[1]
        )
        assert newer == {1: 2}
        stub = control_pb2_grpc.ControlStub(grpc.insecure_channel(address))
        assignment = stub.GetAssignment(control_pb2.GetAssignmentRequest(computations=["counts"]))
        assert [(lease.node_id, lease.epoch) for lease in assignment.leases] == [
            ("old", 1),
            ("new", 2),
        ]
        for _ in range(100):
            if superseded:
                break
            time.sleep(0.05)
        assert superseded[0] == (1, 2, "new"), "the old owner learns it lost interval 1"
        watch.stop()
        with pytest.raises(ValueError, match="refused"):
            register_intervals(
                address, node_id="z", computation="nope", node_address="x", intervals=[0]
            )
    finally:
        server.stop(0.5).wait()
