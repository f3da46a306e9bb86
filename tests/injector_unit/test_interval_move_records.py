"""Moves in the ownership registry (issue 34): recorded in both journal files before the
answer, so that whichever single file is lost the interval is still leased only to the
node it moved to; an old owner that claims it again is told it moved away."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from millrace.deployment import NodePlacement
from millrace.injector.control_service import ControlService
from millrace.injector.ownership import EPOCHS_FILE, OwnershipRegistry
from millrace.wire.v1 import control_pb2, control_pb2_grpc, record_pb2
from tests.workloads import two_stage_topology


def test_a_moved_interval_is_leased_only_to_the_node_it_moved_to(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    [first] = registry.register("a", "counts", "127.0.0.1:1", [0])
    assert registry.move("counts", 0, "b") == first
    assert registry.register("a", "counts", "127.0.0.1:1", [0, 1])[0].index == 1
    assert registry.moved_away("a", "counts", [0, 1]) == [0]
    [taken] = registry.register("b", "counts", "127.0.0.1:2", [0], {0: 4})
    assert (taken.node_id, taken.epoch) == ("b", 5), "above the store's epoch"
    assert registry.moves(["counts"]) == {("counts", 0): "b"}
    with pytest.raises(ValueError, match="has no interval 9"):
        registry.move("counts", 9, "b")


@pytest.mark.parametrize("lost", ["ownership.json", EPOCHS_FILE])
def test_a_move_survives_the_loss_of_either_journal_file(tmp_path: Path, lost: str) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0])
    registry.move("counts", 0, "b")
    (tmp_path / lost).unlink()
    reopened = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    assert reopened.moves() == {("counts", 0): "b"}
    assert reopened.register("a", "counts", "127.0.0.1:1", [0]) == []
    [lease] = reopened.register("b", "counts", "127.0.0.1:2", [0])
    assert lease.epoch == 2, "epochs never go back"
    body = json.loads((tmp_path / EPOCHS_FILE).read_text())
    assert body["moved"] == [["counts", 0, "b"]]


@contextmanager
def control_service(
    registry: OwnershipRegistry, nodes: dict[str, NodePlacement]
) -> Iterator[control_pb2_grpc.ControlStub]:
    """The registry's ``Control`` service on a loopback port; a stub calling it."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    control_pb2_grpc.add_ControlServicer_to_server(ControlService(registry, nodes), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield control_pb2_grpc.ControlStub(channel)
    finally:
        server.stop(None)


def test_move_interval_over_grpc_checks_the_node_and_shows_the_move(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0])
    nodes = {
        name: NodePlacement(name=name, computation=c, intervals=(), address="127.0.0.1:1")
        for name, c in {"a": "counts", "b": "counts", "t": "totals"}.items()
    }
    with control_service(registry, nodes) as stub:

        def move(to: str, index: int = 0, count: int = 2) -> control_pb2.MoveIntervalResponse:
            interval = record_pb2.KeyInterval(computation="counts", index=index, count=count)
            request = control_pb2.MoveIntervalRequest(interval=interval, to_node_id=to)
            answer: control_pb2.MoveIntervalResponse = stub.MoveInterval(request, timeout=5)
            return answer

        for to, index, count, code, says in (
            ("t", 0, 2, grpc.StatusCode.FAILED_PRECONDITION, "runs totals"),
            ("nobody", 0, 2, grpc.StatusCode.INVALID_ARGUMENT, "no node"),
            ("b", 0, 3, grpc.StatusCode.INVALID_ARGUMENT, "has 2 intervals"),
            ("b", 5, 2, grpc.StatusCode.INVALID_ARGUMENT, "has no interval 5"),
        ):
            with pytest.raises(grpc.RpcError) as refused:
                move(to, index, count)
            assert refused.value.code() == code and says in refused.value.details()
        assert registry.moves() == {}, "nothing recorded by a refused move"
        answer = move("b")
        assert answer.current.node_id == "a" and answer.move.to_node_id == "b"
        shown = stub.GetAssignment(control_pb2.GetAssignmentRequest(), timeout=5)
        assert [(m.interval.index, m.to_node_id) for m in shown.moves] == [(0, "b")]
        request = control_pb2.RegisterNodeRequest(
            node_id="a", computation="counts", address="127.0.0.1:1", interval_indexes=[0, 1]
        )
        registered = stub.RegisterNode(request, timeout=5)
        assert list(registered.moved_away) == [0]
        assert [lease.interval.index for lease in registered.leases] == [1]


def test_load_reports_and_drains_over_grpc_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    nodes = {
        name: NodePlacement(name=name, computation=c, intervals=placed, address="127.0.0.1:1")
        for name, (c, placed) in {
            "a": ("counts", (0, 1)), "b": ("counts", ()), "t": ("totals", (0,)),
        }.items()
    }  # fmt: skip
    with control_service(registry, nodes) as stub:

        def report(node: str, computation: str = "counts") -> None:
            load = control_pb2.IntervalLoad(index=0, epoch=1, records_committed=5)
            request = control_pb2.ReportLoadRequest(
                node_id=node, computation=computation, intervals=[load]
            )
            stub.ReportLoad(request, timeout=5)

        def refused(call: object, code: grpc.StatusCode, says: str) -> None:
            with pytest.raises(grpc.RpcError) as error:
                call()  # type: ignore[operator]
            assert error.value.code() == code and says in error.value.details()

        refused(lambda: report("nobody"), grpc.StatusCode.INVALID_ARGUMENT, "no node")
        refused(lambda: report("t"), grpc.StatusCode.INVALID_ARGUMENT, "runs totals")
        drain_a = control_pb2.DrainNodeRequest(node_id="a")
        refused(
            lambda: stub.DrainNode(drain_a, timeout=5),
            grpc.StatusCode.FAILED_PRECONDITION,
            "no other live node of counts",
        )
        assert registry.draining() == frozenset(), "a refused drain records nothing"
        report("b")  # b is live now: it can take a's intervals
        drained = stub.DrainNode(drain_a, timeout=5)
        assert [(m.interval.index, m.to_node_id) for m in drained.moves] == [(0, "b"), (1, "b")]
        layout = stub.GetLayout(control_pb2.GetLayoutRequest(computations=["counts"]), 5)
        assert [(s.node_id, s.moving_to) for s in layout.intervals] == [("a", "b"), ("a", "b")]
        assert {(n.node_id, n.live, n.draining) for n in layout.nodes} == {
            ("a", False, True),
            ("b", True, False),
        }
        assert [c.reason for c in layout.changes] == ["drain", "drain"]
        assignment = stub.GetAssignment(control_pb2.GetAssignmentRequest(), timeout=5)
        assert list(assignment.draining) == ["a"]
        refused(
            lambda: stub.DrainNode(control_pb2.DrainNodeRequest(node_id="b"), timeout=5),
            grpc.StatusCode.FAILED_PRECONDITION,
            "no other live node",
        )
        stub.DrainNode(control_pb2.DrainNodeRequest(node_id="a", resume=True), timeout=5)
        assert registry.draining() == frozenset()
