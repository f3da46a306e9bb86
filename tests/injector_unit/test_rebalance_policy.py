"""The rebalancer's decisions (pure functions), its load table, and drains' records."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from millrace.computations import IntervalId, Layout
from millrace.deployment import NodePlacement, RebalanceSettings
from millrace.injector.ownership import EPOCHS_FILE, OwnershipRegistry
from millrace.injector.rebalance import (
    IntervalSample,
    LayoutMetrics,
    LoadTable,
    Rebalancer,
    plan_drain,
    plan_merge,
    plan_move,
)
from tests.workloads import two_stage_topology


def _move(owners: dict[int, str], rates: dict[int, float], nodes: set[str], **kw: object):  # type: ignore[no-untyped-def]
    settings = {"movable": set(owners), "imbalance_percent": 30, "min_records_per_s": 100}
    settings.update(kw)
    return plan_move(owners, rates, nodes, **settings)  # type: ignore[arg-type]


def test_a_node_with_no_interval_takes_one_from_the_fullest() -> None:
    owners = {0: "a", 1: "a", 2: "a", 3: "b"}
    proposal = _move(owners, {}, {"a", "b", "c"})
    assert proposal is not None
    assert (proposal.from_node, proposal.to_node) == ("a", "c")
    assert proposal.index in (0, 1, 2)


def test_balanced_or_light_loads_move_nothing() -> None:
    owners = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert _move(owners, {0: 500, 1: 500, 2: 450, 3: 450}, {"a", "b"}) is None
    assert _move(owners, {0: 40, 1: 40, 2: 0, 3: 0}, {"a", "b"}) is None, "under the minimum"
    assert _move({0: "a", 1: "b"}, {0: 9000, 1: 0}, {"a", "b"}) is None, "one interval each"


def test_the_move_that_narrows_the_gap_most_is_chosen() -> None:
    owners = {0: "a", 1: "a", 2: "a", 3: "b"}
    rates = {0: 1000.0, 1: 400.0, 2: 100.0, 3: 300.0}
    proposal = _move(owners, rates, {"a", "b"})
    assert proposal is not None and proposal.index == 1 and proposal.to_node == "b"
    assert proposal.reason == (
        "rebalance: a 1500.00 cpu, b 300.00 cpu, interval 1 400.00 cpu (400 rec/s)"
    )


def test_intervals_cooling_down_stay() -> None:
    owners = {0: "a", 1: "a", 2: "b"}
    rates = {0: 1000.0, 1: 800.0, 2: 100.0}
    assert _move(owners, rates, {"a", "b"}, movable={0}) is not None
    assert _move(owners, rates, {"a", "b"}, movable=set()) is None


@pytest.mark.parametrize("seed", range(200))
def test_a_load_move_always_lowers_the_busier_nodes_load(seed: int) -> None:
    rng = random.Random(seed)
    nodes = {f"n{i}" for i in range(rng.randint(2, 4))}
    owners = {i: rng.choice(sorted(nodes)) for i in range(rng.randint(2, 12))}
    rates = {i: rng.paretovariate(1.3) * 100 for i in owners}
    proposal = _move(owners, rates, nodes)
    if proposal is None:
        return
    load = {n: sum(r for i, r in rates.items() if owners[i] == n) for n in nodes}
    moved = rates.get(proposal.index, 0.0)
    assert owners[proposal.index] == proposal.from_node != proposal.to_node
    if any(owners[i] == proposal.to_node for i in owners):
        before = max(load[proposal.from_node], load[proposal.to_node])
        after = max(load[proposal.from_node] - moved, load[proposal.to_node] + moved)
        assert after < before


def test_a_drain_spreads_the_intervals_over_the_others() -> None:
    owners = {0: "a", 1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}
    plan = plan_drain("a", owners, {0: 10, 1: 500, 2: 20}, {"b", "c"})
    assert set(plan) == {0, 1, 2}
    assert plan[1] == "b", "the busiest first, to the node with the fewest"
    counts = {n: sum(1 for o in owners.values() if o == n) for n in "bc"}
    for target in plan.values():
        counts[target] += 1
    assert abs(counts["b"] - counts["c"]) <= 1
    assert plan_drain("a", owners, {}, set()) == {}


def test_loads_become_rates_and_carry_over_a_move() -> None:
    now = [100.0]
    table = LoadTable(clock=lambda: now[0])
    table.report("a", "counts", [IntervalSample(0, 1, 0, 0.0)])
    now[0] += 1
    table.report("a", "counts", [IntervalSample(0, 1, 1000, 0.5)])
    assert table.rates("counts") == {0: 500.0}
    assert table.cpu("counts") == {0: 0.25}
    now[0] += 1
    table.report("b", "counts", [IntervalSample(0, 2, 0, 0.0)])
    assert table.rates("counts") == {0: 500.0}, "the new owner's counters start again"
    now[0] += 1
    table.report("b", "counts", [IntervalSample(0, 2, 1000, 0.0)])
    assert table.rates("counts") == {0: 750.0}
    assert table.live_nodes("counts") == {"a", "b"}
    now[0] += 10
    assert table.live_nodes("counts") == set() and not table.is_live("a")


def test_a_drain_is_journaled_in_both_files_and_refuses_the_drained(tmp_path: Path) -> None:
    path = tmp_path / "ownership.json"
    registry = OwnershipRegistry(two_stage_topology(), path)
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.drain("a", {IntervalId("counts", 0): "b", IntervalId("counts", 1): "b"})
    assert [(c.index, c.from_node, c.to_node, c.reason) for c in registry.changes] == [
        (0, "a", "b", "drain"),
        (1, "a", "b", "drain"),
    ]
    with pytest.raises(ValueError, match="being drained"):
        registry.move("counts", 0, "a")
    for lost in ("ownership.json", EPOCHS_FILE):
        kept = tmp_path / "kept"
        kept.mkdir(exist_ok=True)
        for name in ("ownership.json", EPOCHS_FILE):
            (kept / name).write_bytes((tmp_path / name).read_bytes())
        (kept / lost).unlink()
        reopened = OwnershipRegistry(two_stage_topology(), kept / "ownership.json")
        assert reopened.draining() == {"a"}
        assert reopened.register("a", "counts", "127.0.0.1:1", [0, 1]) == []
    registry.resume("a")
    assert registry.draining() == frozenset()
    registry.move("counts", 0, "a")
    assert registry.moves_by_reason == {("counts", "drain"): 2, ("counts", "operator"): 1}


def test_the_layout_metrics_show_moves_loads_and_nodes(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.move("counts", 1, "b", reason="rebalance: a 900 rec/s, b 0 rec/s")
    now = [0.0]
    loads = LoadTable(clock=lambda: now[0])
    loads.report("a", "counts", [IntervalSample(0, 1, 0, 0.0)])
    now[0] = 2.0
    loads.report("a", "counts", [IntervalSample(0, 1, 800, 0.0)])
    nodes = {
        name: NodePlacement(name=name, computation="counts", intervals=placed, address="h:1")
        for name, placed in {"a": (0, 1), "b": ()}.items()
    }
    metrics = CollectorRegistry()
    metrics.register(LayoutMetrics(registry, loads, nodes))
    text = generate_latest(metrics).decode()
    for line in (
        'millrace_interval_moves_total{computation="counts",reason="rebalance"} 1.0',
        'millrace_interval_records_per_second{computation="counts",interval="0",node="a"} 200.0',
        'millrace_interval_cpu_ratio{computation="counts",interval="0",node="a"} 0.0',
        'millrace_interval_moving{computation="counts",interval="1"} 1.0',
        'millrace_interval_moving{computation="counts",interval="0"} 0.0',
        'millrace_node_state{node="a",state="live"} 1.0',
        'millrace_node_state{node="b",state="live"} 0.0',
        'millrace_node_state{node="b",state="draining"} 0.0',
    ):
        assert line in text, f"{line} not in\n{text}"


def _rebalancer(tmp_path: Path) -> tuple[Rebalancer, OwnershipRegistry, LoadTable, list[float]]:
    """A rebalancer over ``counts`` (2 intervals, both placed on ``a``; ``b`` has none)
    on a clock the test moves."""
    now = [1000.0]
    registry = OwnershipRegistry(two_stage_topology(), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    loads = LoadTable(clock=lambda: now[0])
    nodes = {
        name: NodePlacement(name=name, computation="counts", intervals=placed, address="h:1")
        for name, placed in {"a": (0, 1), "b": ()}.items()
    }
    settings = RebalanceSettings(enabled=True, period_ms=1000, min_records_per_s=0)
    return Rebalancer(registry, loads, nodes, settings, clock=lambda: now[0]), registry, loads, now


def test_a_move_to_a_node_that_stopped_reporting_goes_back_to_its_holder(
    tmp_path: Path,
) -> None:
    rebalancer, registry, loads, now = _rebalancer(tmp_path)
    registry.move("counts", 1, "b")  # b never reports: it is down
    loads.report("a", "counts", [IntervalSample(0, 1, 0, 0.0), IntervalSample(1, 1, 0, 0.0)])
    now[0] += 1.5
    loads.report("a", "counts", [IntervalSample(0, 1, 10, 0.0), IntervalSample(1, 1, 10, 0.0)])
    rebalancer.tick()
    assert registry.moves() == {("counts", 1): "a"}
    assert registry.changes[-1].reason == "rebalance: b stopped reporting"


def test_a_load_move_waits_for_a_second_look_that_agrees(tmp_path: Path) -> None:
    now = [1000.0]
    registry = OwnershipRegistry(two_stage_topology((3, 1)), tmp_path / "ownership.json")
    registry.register("a", "counts", "127.0.0.1:1", [0, 1])
    registry.register("b", "counts", "127.0.0.1:2", [2])
    loads = LoadTable(clock=lambda: now[0])
    nodes = {
        name: NodePlacement(name=name, computation="counts", intervals=placed, address="h:1")
        for name, placed in {"a": (0, 1), "b": (2,)}.items()
    }
    settings = RebalanceSettings(enabled=True, period_ms=1000, min_records_per_s=0)
    rebalancer = Rebalancer(registry, loads, nodes, settings, clock=lambda: now[0])
    used = {0: 0.0, 1: 0.0, 2: 0.0}

    def look(shares: dict[int, float]) -> None:
        """One second on which each interval's worker used ``shares`` of a core."""
        now[0] += 1.0
        for index, share in shares.items():
            used[index] += share
        loads.report("a", "counts", [IntervalSample(i, 1, 0, used[i]) for i in (0, 1)])
        loads.report("b", "counts", [IntervalSample(2, 1, 0, used[2])])
        now[0] += 0.1
        rebalancer.tick()

    look({0: 0, 1: 0, 2: 0})
    look({0: 0.4, 1: 0.4, 2: 0.1})  # a is busier, once: nothing yet
    assert registry.changes_recorded == 0
    look({0: 0.1, 1: 0.1, 2: 0.4})  # the other way: the first look does not count
    assert registry.changes_recorded == 0
    for _ in range(6):
        look({0: 0.5, 1: 0.5, 2: 0.05})
    assert registry.changes_recorded == 1, "a second look agreed: one move, then cool-down"
    [change] = registry.changes
    assert (change.from_node, change.to_node) == ("a", "b")
    assert change.reason.startswith("rebalance: a ")


def test_one_interval_too_heavy_to_move_splits() -> None:
    proposal = _move({0: "a"}, {0: 0.9}, {"a", "b"}, splittable={0}, min_records_per_s=0)
    assert proposal is not None and proposal.split
    assert (proposal.index, proposal.from_node, proposal.to_node) == (0, "a", "a")
    assert _move({0: "a"}, {0: 0.9}, {"a", "b"}, min_records_per_s=0) is None, "not splittable"
    # a heavy one beside a light one: moving the heavy one would only swap the nodes
    heavy = _move(
        {0: "a", 1: "a", 2: "b"}, {0: 0.9, 1: 0.05, 2: 0.1}, {"a", "b"},
        splittable={0}, min_records_per_s=0,
    )  # fmt: skip
    assert heavy is not None and heavy.split and heavy.index == 0
    # one that balances them moves instead
    fair = _move(
        {0: "a", 1: "a", 2: "b"}, {0: 0.5, 1: 0.4, 2: 0.1}, {"a", "b"},
        splittable={0, 1}, min_records_per_s=0,
    )  # fmt: skip
    assert fair is not None and not fair.split


def test_the_rebalancer_splits_a_hot_interval_and_moves_a_half(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology((1, 1)), tmp_path / "ownership.json")
    registry.register("a", "counts", "h:1", [0])
    nodes = {
        "a": NodePlacement(name="a", computation="counts", intervals=(0,), address="h:1"),
        "b": NodePlacement(name="b", computation="counts", intervals=(), address="h:2"),
    }
    loads = LoadTable()
    now = [0.0]
    rebalancer = Rebalancer(
        registry, loads, nodes,
        RebalanceSettings(enabled=True, period_ms=1000, cooldown_ms=0),
        clock=lambda: now[0],
    )  # fmt: skip
    for second in range(1, 4):
        now[0] = float(second)
        loads.report("a", "counts", [IntervalSample(0, 1, 1000 * second, 0.9 * second)])
        loads.report("b", "counts", [])
        rebalancer.tick()
    assert registry.layout("counts").ids() == [1, 2]
    assert registry.changes[-1].reason.startswith("split: rebalance: a ")


def _split_layout() -> Layout:
    """``counts`` of 2 first intervals, 0 split into 2 and 3, 3 split into 8 and 9."""
    layout = Layout.base("counts", 2)
    layout = layout.split(layout.intervals[0])
    return layout.split(next(i for i in layout if i.id(2) == 3))


def _merge(owners: dict[int, str], rates: dict[int, float], **kw: object):  # type: ignore[no-untyped-def]
    settings = {"mergeable": set(owners), "min_records_per_s": 400}
    settings.update(kw)
    return plan_merge(_split_layout(), owners, rates, **settings)  # type: ignore[arg-type]


def test_cold_halves_on_one_node_merge() -> None:
    assert _split_layout().ids() == [2, 8, 9, 1]
    owners = {2: "a", 8: "a", 9: "a", 1: "b"}
    cold = {2: 50.0, 8: 20.0, 9: 30.0, 1: 500.0}
    proposal = _merge(owners, cold)
    assert proposal is not None and proposal.action == "merge"
    assert (proposal.index, proposal.from_node, proposal.to_node) == (8, "a", "a")
    assert proposal.reason == "rebalance: 8 and 9 cold (50 rec/s together), merged into 3"
    # 2 and 3 are halves too, but 3 is split: only 8 and 9 can merge now
    assert _merge(owners, {**cold, 8: 60.0, 9: 60.0}) is None, "over a quarter of 400"
    assert _merge(owners, cold, mergeable={2, 9, 1}) is None, "8 cools down"
    assert _merge(owners, {2: 0.0, 9: 0.0, 1: 0.0}) is None, "8 has no rate yet"
    assert _merge(owners, cold, min_records_per_s=0) is None


def test_a_cold_half_joins_its_other_half_when_its_node_keeps_work() -> None:
    cold = {2: 5.0, 8: 20.0, 9: 30.0, 1: 500.0}
    apart = _merge({2: "a", 8: "a", 9: "b", 1: "b"}, cold)
    assert apart is not None and apart.action == "move"
    assert (apart.index, apart.from_node, apart.to_node) == (8, "a", "b")
    assert apart.reason == "rebalance: 8 and 9 cold (50 rec/s together), 8 joins 9 to merge"
    # the colder half moves when both nodes keep work
    both = _merge({2: "a", 8: "a", 9: "b", 1: "b"}, {**cold, 9: 10.0})
    assert both is not None and both.index == 9
    # never empty a node to merge: a holds 8 alone, so 9 (on b with 1) goes to a
    alone = _merge({2: "c", 8: "a", 9: "b", 1: "b"}, {**cold, 9: 30.0, 8: 1.0})
    assert alone is not None and (alone.index, alone.to_node) == (9, "a")
    assert _merge({2: "c", 8: "a", 9: "b", 1: "d"}, cold) is None, "each alone on its node"


def test_the_rebalancer_merges_cold_halves_after_two_looks(tmp_path: Path) -> None:
    registry = OwnershipRegistry(two_stage_topology((2, 2)), tmp_path / "ownership.json")
    registry.register("a", "counts", "h:1", [0])
    registry.register("b", "counts", "h:2", [1])
    registry.split("counts", 0)
    registry.register("a", "counts", "h:1", [2, 3])
    nodes = {
        "a": NodePlacement(name="a", computation="counts", intervals=(0,), address="h:1"),
        "b": NodePlacement(name="b", computation="counts", intervals=(1,), address="h:2"),
    }
    now = [0.0]
    loads = LoadTable(clock=lambda: now[0])
    rebalancer = Rebalancer(
        registry, loads, nodes,
        RebalanceSettings(enabled=True, period_ms=1000, cooldown_ms=3000),
        clock=lambda: now[0],
    )  # fmt: skip
    changes = registry.changes_recorded
    for second in range(1, 8):
        now[0] = float(second)
        loads.report("a", "counts", [IntervalSample(i, 2, second, 0.0) for i in (2, 3)])
        loads.report("b", "counts", [IntervalSample(1, 1, 1000 * second, 0.0)])
        rebalancer.tick()
        if second <= 3:
            assert registry.changes_recorded == changes, "the halves cool down"
    assert registry.layout("counts").ids() == [0, 1]
    assert registry.changes_recorded == changes + 1, "one merge, then nothing"
    assert registry.changes[-1].reason.startswith("merge: rebalance: 2 and 3 cold")
