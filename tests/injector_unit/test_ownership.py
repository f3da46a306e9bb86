"""Interval leases: fresh epochs per registration, durable across restarts, over gRPC."""

from __future__ import annotations

import json
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from millrace.computations import IntervalId
from millrace.injector.control_service import ControlService
from millrace.injector.ownership import OwnershipRegistry
from millrace.node._control_link import LeaseKeeper, register_intervals
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
        reopened.register("a", "counts", "h:1", [7])


def test_registration_and_supersession_over_grpc(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    control_pb2_grpc.add_ControlServicer_to_server(ControlService(registry), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    address = f"127.0.0.1:{port}"
    try:
        held = register_intervals(
            address, node_id="old", computation="counts", node_address="h:1", intervals=[0, 1]
        )
        assert held == {0: 1, 1: 1}
        superseded: list[tuple[str, int, int, str]] = []
        routes: list[tuple[str, int, str]] = []
        keeper = LeaseKeeper(
            address,
            held=lambda: {IntervalId("counts", i): epoch for i, epoch in held.items()},
            on_superseded=lambda c, i, e, owner: superseded.append((c, i, e, owner)),
            on_routes=routes.extend,
            poll_s=0.05,
        )
        keeper.start()
        assert keeper.wait_fresh(IntervalId("counts", 1), 5.0), "the registry confirms the lease"
        newer = register_intervals(
            address, node_id="new", computation="counts", node_address="h:2", intervals=[1]
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
        assert superseded[0] == ("counts", 1, 2, "new"), "the old owner learns it lost interval 1"
        assert ("counts", 1, "h:2") in routes, "senders learn where interval 1 is served now"
        assert not keeper.wait_fresh(IntervalId("counts", 1), 0.5), (
            "a superseded lease is not confirmed"
        )
        assert keeper.fresh(IntervalId("counts", 0)), "the interval it kept still is"
        keeper.stop()
        with pytest.raises(ValueError, match="refused"):
            register_intervals(
                address, node_id="z", computation="nope", node_address="h:1", intervals=[0]
            )
    finally:
        server.stop(0.5).wait()


def test_registration_grants_above_the_epoch_a_node_shows(tmp_path: Path) -> None:
    """Issue 14: a registry that lost ownership.json never hands out an epoch a store
    already claimed (a zombie would outrank the new owner)."""
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    [lease] = registry.register("a", "counts", "h:1", [0], {0: 41})
    assert lease.epoch == 42
    (tmp_path / "ownership.json").unlink()
    (tmp_path / "epochs.json").unlink()  # both records of the grants lost
    lost = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    [fresh] = lost.register("b", "counts", "h:2", [0])
    assert fresh.epoch == 1, "nothing shown, nothing known"
    lost.raise_floor("counts", 0, 42)  # e.g. from the watermark journal
    [floored] = lost.register("b", "counts", "h:2", [0])
    assert floored.epoch == 43


def test_forged_stored_epochs_are_refused(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    for forged in (2**63 - 1, 2**53, -1):
        with pytest.raises(ValueError, match="outside"):
            registry.register("a", "counts", "h:1", [0], {0: forged})
    assert registry.leases()[1] == [], "nothing was leased"


def test_the_journal_is_replaced_durably(tmp_path: Path) -> None:
    path = tmp_path / "ownership.json"
    registry = OwnershipRegistry(two_stage_topology(), path)
    registry.register("a", "counts", "h:1", [0, 1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epochs.json", "ownership.json"], (
        "no temp file left"
    )
    assert json.loads((tmp_path / "epochs.json").read_text()) == {
        "granted": [["counts", 0, 1], ["counts", 1, 1]],
        "moved": [],
        "draining": [],
        "layouts": {},
    }
    assert len(json.loads(path.read_text())["leases"]) == 2


@pytest.mark.parametrize("lost", ["ownership.json", "epochs.json"])
def test_whichever_registry_file_is_lost_no_epoch_is_granted_again(
    tmp_path: Path, lost: str
) -> None:
    """Issue 33: each grant is recorded durably in two files before it is answered, so
    losing either (with no watermark journal to help) never hands out an epoch twice."""
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    for node in ("a", "b", "c"):
        registry.register(node, "counts", "h:1", [0, 1])
    registry.register("d", "counts", "h:1", [1])
    (tmp_path / lost).unlink()
    reopened = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    assert reopened.lost == tmp_path / lost
    leases = reopened.register("e", "counts", "h:2", [0, 1])
    assert [lease.epoch for lease in leases] == [4, 5]
    (tmp_path / ("epochs.json" if lost == "ownership.json" else "ownership.json")).unlink()
    again = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    assert [lease.epoch for lease in again.register("f", "counts", "h:3", [0, 1])] == [5, 6], (
        "the file written after the loss holds every interval's epoch"
    )


def test_a_malformed_epochs_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "h:1", [0])
    (tmp_path / "epochs.json").write_text("{not json")
    with pytest.raises(ValueError, match="move it aside"):
        OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
