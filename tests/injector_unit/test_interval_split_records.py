"""Splits in the ownership registry (issue 34): the layout is recorded in both journal
files before the answer; the interval is retired (never leased again, its epoch kept as
a floor) and its halves are placed on the node that held it, at epochs above its."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millrace.computations import IntervalId, KeyInterval
from millrace.injector.ownership import EPOCHS_FILE, OwnershipRegistry
from millrace.wire.v1 import control_pb2, record_pb2
from tests.injector_unit.test_interval_move_records import control_service
from tests.workloads import two_stage_topology


def test_a_split_interval_is_replaced_by_its_halves_on_its_node(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1], {1: 6})
    low, high = registry.split("counts", 1)
    assert (low, high) == (KeyInterval("counts", 2, 4), KeyInterval("counts", 3, 4))
    assert registry.layout("counts").ids() == [0, 4, 5]
    assert registry.moves(["counts"]) == {("counts", 4): "a", ("counts", 5): "a"}
    _, leases = registry.leases(["counts"])
    assert [lease.index for lease in leases] == [0]
    with pytest.raises(ValueError, match="has no interval 1"):
        registry.register("a", "counts", "127.0.0.1:1", [1])
    assert registry.register("b", "counts", "127.0.0.1:2", [4]) == []  # placed on a
    granted = registry.register("a", "counts", "127.0.0.1:1", [4, 5], {4: 6, 5: 6})
    assert [(g.index, g.epoch) for g in granted] == [(4, 8), (5, 8)]  # above its 7
    assert registry.changes[-1].reason == "split: operator"
    with pytest.raises(ValueError, match="unknown computation"):
        registry.split("other", 0)


@pytest.mark.parametrize("lost", ["ownership.json", EPOCHS_FILE])
def test_a_split_survives_the_loss_of_either_journal_file(tmp_path: Path, lost: str) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.split("counts", 0)
    (tmp_path / lost).unlink()
    reopened = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    assert reopened.layout("counts").ids() == [2, 3, 1]
    with pytest.raises(ValueError, match="has no interval 0"):
        reopened.register("a", "counts", "127.0.0.1:1", [0])
    [half] = reopened.register("a", "counts", "127.0.0.1:1", [2])
    assert half.epoch == 2, "above the interval's epoch"
    body = json.loads((tmp_path / EPOCHS_FILE).read_text())
    assert body["layouts"] == {"counts": [[0, 4], [1, 4], [1, 2]]}


def test_a_split_is_refused_for_an_interval_moving_or_never_leased(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    with pytest.raises(ValueError, match="never leased"):
        registry.split("counts", 0)
    registry.register("a", "counts", "127.0.0.1:1", [0])
    registry.move("counts", 0, "b")
    with pytest.raises(ValueError, match="moving to b"):
        registry.split("counts", 0)
    assert registry.layout("counts").ids() == [0, 1]


def test_split_interval_over_grpc_and_the_layout_in_the_assignment(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    with control_service(registry, {}) as stub:
        assert not stub.GetAssignment(control_pb2.GetAssignmentRequest()).layout
        answer = stub.SplitInterval(
            control_pb2.SplitIntervalRequest(
                interval=record_pb2.KeyInterval(computation="counts", index=1, count=2)
            )
        )
        assert [h.index for h in answer.halves] == [4, 5]
        layout = stub.GetAssignment(control_pb2.GetAssignmentRequest()).layout
        assert [(i.computation, i.index, i.count) for i in layout] == [
            ("counts", 0, 2), ("counts", 4, 2), ("counts", 5, 2)
        ]  # fmt: skip


def test_two_halves_on_one_node_merge_back_above_both_epochs(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.split("counts", 1)
    registry.register("a", "counts", "127.0.0.1:1", [4, 5])
    registry.move("counts", 5, "b")
    with pytest.raises(ValueError, match="moving"):
        registry.merge("counts", 4)
    [moved] = registry.register("b", "counts", "127.0.0.1:2", [5], {5: 9})
    with pytest.raises(ValueError, match="one node"):
        registry.merge("counts", 4)
    registry.move("counts", 5, "a")
    registry.register("a", "counts", "127.0.0.1:1", [5], {5: moved.epoch})
    whole = registry.merge("counts", 5)
    assert whole == KeyInterval("counts", 1, 2)
    assert registry.layout("counts").ids() == [0, 1]
    assert registry.moves(["counts"])[IntervalId("counts", 1)] == "a"
    assert registry.changes[-1].reason == "merge: operator"
    [lease] = registry.register("a", "counts", "127.0.0.1:1", [1])
    assert lease.epoch > moved.epoch + 1, "above both halves' epochs"
    with pytest.raises(ValueError, match="first intervals"):
        registry.merge("counts", 1)
    with pytest.raises(ValueError, match="has no interval 4"):
        registry.register("a", "counts", "127.0.0.1:1", [4])


@pytest.mark.parametrize("lost", [None, "ownership.json", EPOCHS_FILE])
def test_what_a_split_or_merge_places_moves_only_once_registered(
    tmp_path: Path, lost: str | None
) -> None:
    """A half (or a merged whole) is made from the store on the node that held what it
    came from, and nowhere else: until that node registers it, neither a move nor a
    drain may send it elsewhere (the other node would start it empty, or from an old
    copy); the registry remembers this across the loss of either journal file."""
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.split("counts", 1)
    if lost is not None:
        (tmp_path / lost).unlink()
        registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    assert registry.unmade("counts") == {4: "a", 5: "a"}
    with pytest.raises(ValueError, match="being made on a"):
        registry.move("counts", 4, "b")
    with pytest.raises(ValueError, match="being made on a"):
        registry.drain("a", {IntervalId("counts", 5): "b"})
    registry.move("counts", 4, "a")  # where it is made: nothing changes
    registry.register("a", "counts", "127.0.0.1:1", [4, 5])
    assert registry.unmade("counts") == {}
    registry.move("counts", 4, "b")
    registry.register("b", "counts", "127.0.0.1:2", [4])
    registry.move("counts", 4, "a")
    registry.register("a", "counts", "127.0.0.1:1", [4])
    registry.merge("counts", 4)
    assert registry.unmade("counts") == {1: "a"}, "the whole again, made on a"
    with pytest.raises(ValueError, match="being made on a"):
        registry.move("counts", 1, "b")
    registry.move("counts", 0, "b")  # a first interval never split moves as before
