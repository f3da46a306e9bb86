"""Issue 34: a node with no placement takes work from the rebalancer; a drained node
hands its intervals away and stops; on real processes, with records flowing.

``counts`` has 4 intervals, all placed on ``counts-0``; ``counts-1`` starts with none.
With ``[rebalance] enabled``, the injector moves intervals to ``counts-1`` until the
two carry about the same load. Then ``millrace nodes drain counts-1`` moves them back,
and ``counts-1`` exits 0 by itself. The sink equals the exact totals throughout, and
every lease shown had one node per epoch.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.move_cluster import Ingest, LeaseWatch, deployment_file, running_cluster

pytestmark = pytest.mark.slow

REBALANCE = """
[rebalance]
enabled = true
period_ms = 500
min_records_per_s = 50
cooldown_ms = 2000
max_moves_per_minute = 20
"""


def test_an_empty_node_gets_work_and_a_drained_node_hands_it_back(tmp_path: Path) -> None:
    placements = {"counts-0": [0, 1, 2, 3], "counts-1": []}
    deployment, at = deployment_file(tmp_path, placements, intervals=4, extra=REBALANCE)
    with running_cluster(tmp_path, deployment, at) as cluster:
        watch = LeaseWatch(cluster.injector_address)
        watch.start()
        with Ingest(cluster) as ingest:

            def balanced() -> bool:
                held = list(cluster.holders("counts").values())
                return held.count("counts-0") == 2 and held.count("counts-1") == 2

            wait_until(balanced, 120, "two intervals on each counts node")
            reasons = [change.reason for change in cluster.layout().changes]
            assert any("has no interval" in r for r in reasons), reasons
            assert any(r.startswith("rebalance: counts-0") for r in reasons), reasons
            listed = cluster.run("nodes", "list")
            assert "counts-1" in listed and "live" in listed and "rebalancer: on" in listed
            status = cluster.run("status")
            assert "layout  (rebalancer on)" in status and "moved counts/" in status, status
            time.sleep(3.0)  # settled: no more moves while the loads stay even
            assert balanced(), cluster.holders("counts")

            drained = cluster.run("nodes", "drain", "counts-1", "--wait-s", "120")
            assert "drained counts-1" in drained, drained
            assert set(cluster.holders("counts").values()) == {"counts-0"}
            node = cluster.processes["counts-1"].process
            assert node is not None
            assert node.wait(timeout=60) == 0, "a drained node stops by itself with 0"
            time.sleep(2.0)  # the rebalancer moves nothing to a drained node
            assert set(cluster.holders("counts").values()) == {"counts-0"}
        ingest.finish_and_check()
        watch.check()

        def shown(name: str) -> tuple[bool, bool]:
            node = next(n for n in cluster.layout().nodes if n.node_id == name)
            return node.live, node.draining

        assert shown("counts-1")[1], "draining"
        wait_until(lambda: shown("counts-1") == (False, True), 30, "counts-1 no longer live")


NOTHING_HOT = """
[rebalance]
enabled = true
period_ms = 500
min_records_per_s = 1000000
cooldown_ms = 3000
max_moves_per_minute = 20
"""


def test_cold_halves_come_back_together_and_merge(tmp_path: Path) -> None:
    """An operator splits ``counts/0`` and moves a half to the other node; with nothing
    hot, the rebalancer moves that half back (its node keeps interval 1) and merges the
    halves, while records flow: exact totals, one node per epoch."""
    deployment, at = deployment_file(tmp_path, intervals=2, extra=NOTHING_HOT)
    with running_cluster(tmp_path, deployment, at) as cluster:
        watch = LeaseWatch(cluster.injector_address)
        watch.start()
        with Ingest(cluster) as ingest:
            wait_until(lambda: len(cluster.holders("counts")) == 2, 60, "both intervals leased")
            cluster.split("counts", 0)
            cluster.move("counts", 3, "counts-1")
            assert cluster.holders("counts") == {1: "counts-1", 2: "counts-0", 3: "counts-1"}

            def merged() -> bool:
                return cluster.holders("counts") == {0: "counts-0", 1: "counts-1"}

            wait_until(merged, 120, "the halves merged back into counts/0")
            reasons = [change.reason for change in cluster.layout().changes]
            assert any(r.endswith("3 joins 2 to merge") for r in reasons), reasons
            assert any(r.startswith("merge: rebalance: 2 and 3 cold") for r in reasons), reasons
            time.sleep(3.0)  # settled: nothing splits or moves again
            assert merged(), cluster.holders("counts")
        ingest.finish_and_check()
        watch.check()


def test_a_node_drained_right_after_a_split_hands_over_the_halves_it_made(
    tmp_path: Path,
) -> None:
    """The halves of a split are made from the store of the node that held the
    interval: a drain of that node right after the split waits until it has registered
    them, then moves them (moved before, another node would start them empty)."""
    deployment, at = deployment_file(tmp_path)
    with running_cluster(tmp_path, deployment, at) as cluster:
        watch = LeaseWatch(cluster.injector_address)
        watch.start()
        with Ingest(cluster) as ingest:
            wait_until(lambda: len(cluster.holders("counts")) == 2, 60, "both intervals leased")
            time.sleep(1.0)
            cluster.split("counts", 0, wait=False)
            drained = cluster.run("nodes", "drain", "counts-0", "--wait-s", "120")
            assert "drained counts-0" in drained, drained
            node = cluster.processes["counts-0"].process
            assert node is not None and node.wait(timeout=60) == 0
            assert cluster.holders("counts") == {1: "counts-1", 2: "counts-1", 3: "counts-1"}
        ingest.finish_and_check()
        watch.check()
