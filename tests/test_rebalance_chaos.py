"""Issue 34: the rebalancer moving intervals while nodes and the injector are SIGKILLed.

``counts`` has 4 intervals, all placed on ``counts-0``; ``counts-1`` and ``counts-2``
start with none, and the rebalancer is on. While records flow, a random one of the
three nodes or the injector is SIGKILLed and started again every 0.5-1.5 s, so moves
are cut at any step, targets die before they take an interval and registries restart
with moves under way (and, with no minimum rate, splits of intervals too heavy to
move). Then the kills stop, the layout settles, ``counts-2`` is drained
and stops by itself, and the sink must equal the exact totals; every lease shown had
one node per epoch, epochs only rising.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest

from tests.support import RandomKills, chaos_kills, chaos_rng, wait_until
from tests.support.move_cluster import Ingest, LeaseWatch, deployment_file, running_cluster

pytestmark = pytest.mark.slow

REBALANCE = """
[rebalance]
enabled = true
period_ms = 500
min_records_per_s = 0
cooldown_ms = 1500
max_moves_per_minute = 60
"""
NODES = ("counts-0", "counts-1", "counts-2")


def test_the_rebalancer_under_sigkills_loses_and_repeats_nothing(tmp_path: Path) -> None:
    rng = chaos_rng(3403)
    placements = {"counts-0": [0, 1, 2, 3], "counts-1": [], "counts-2": []}
    deployment, at = deployment_file(tmp_path, placements, intervals=4, extra=REBALANCE)
    with running_cluster(tmp_path, deployment, at) as cluster:
        watch = LeaseWatch(cluster.injector_address)
        watch.start()
        with Ingest(cluster) as ingest:
            victims = {name: cluster.processes[name] for name in (*NODES, "injector")}
            chaos = RandomKills(victims, rng, chaos_kills(12), pause=(0.5, 1.5))
            chaos.start()
            chaos.finish(timeout=300)

            def spread() -> bool:
                """Every interval of the layout now leased (the rebalancer may have split
                some: with no minimum rate, a lone interval is too heavy to move), on two
                nodes or more."""
                try:
                    states = cluster.layout().intervals
                except grpc.RpcError:
                    return False  # the injector restarts
                now = {s.interval.index for s in states if s.interval.computation == "counts"}
                holders = cluster.holders("counts")
                return set(holders) == now and len(set(holders.values())) >= 2

            # All four start on counts-0: only the rebalancer's moves spread them (the
            # injector's list of changes starts again with each restart of it).
            wait_until(spread, 120, "the intervals spread over the nodes again")
            assert chaos.kills >= chaos_kills(12)

            def live(name: str) -> bool:
                return any(n.node_id == name and n.live for n in cluster.layout().nodes)

            # After the injector's last restart, nodes count as live once they report.
            wait_until(lambda: live("counts-0") and live("counts-1"), 30, "live nodes")
            cluster.run("nodes", "drain", "counts-2", "--wait-s", "120")
            node = cluster.processes["counts-2"].process
            assert node is not None and node.wait(timeout=60) == 0
            assert "counts-2" not in cluster.holders("counts").values()
            time.sleep(1.0)
        ingest.finish_and_check()
        watch.check()
