"""An ephemeral processor (a backfill's interval run): the same commits and production
ids as a node's, without remembering record ids or checkpointing productions."""

from __future__ import annotations

from pathlib import Path

from millrace.computations import Topology
from millrace.engine import IntervalProcessor
from millrace.statestore import StateStore
from tests.support import numbered_records
from tests.test_weak_productions import weak_topology


def run(tmp_path: Path, name: str, *, ephemeral: bool) -> tuple[list[bytes], StateStore]:
    store = StateStore.open_rocksdb(tmp_path / name)
    processor = IntervalProcessor(
        topology=Topology.from_dict(weak_topology()), computation="fwd", interval=0,
        store=store, epoch=1, ephemeral=ephemeral,
    )  # fmt: skip
    made: list[bytes] = []
    for start in (0, 10):
        outcome = processor.process_records(numbered_records(start, 10, keys=5), durable=False)
        assert len(outcome.committed) == 10
        made.extend(p.record.record_id for p in outcome.productions)
        if ephemeral:
            assert not outcome.frames, "nothing is checkpointed to send"
    if ephemeral:
        assert processor.pending_productions() == []
        assert not processor.in_flight
    return made, store


def test_ephemeral_runs_make_the_same_productions_and_keep_no_ids(tmp_path: Path) -> None:
    node, node_store = run(tmp_path, "node", ephemeral=False)
    backfill, backfill_store = run(tmp_path, "backfill", ephemeral=True)
    assert backfill == node and len(node) == 20
    ids = [r.record_id for r in numbered_records(0, 20, keys=5)]
    assert all(node_store.begin(1).seen(ids)), "a node remembers its ids"
    assert not any(backfill_store.begin(1).seen(ids)), "an ephemeral run does not"
    assert backfill_store.dedup_stats().lookups == len(ids), "nor looks them up while running"
    node_store.close()
    backfill_store.close()
