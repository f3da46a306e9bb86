"""Randomized delivery chaos between two interval processors over real RocksDB stores.

Acceptance: *a randomized test that reorders, duplicates and redelivers batches
between two nodes and always converges to the same state and outputs.*

Per seed, ``two_stage_topology((1, 1))`` runs as two :class:`IntervalProcessor`
instances (``counts``/0 with ``WindowCounts``, ``totals``/0 with
``WindowTotals``), each over its own RocksDB store in ``tmp_path``, driven the
way a node's worker drives them (sender-epoch fencing, group commit, ack
after commit, outbox resend on restart). Between them, and between them and
the source and the sink, sits a chaotic in-test network that:

- delivers any batch in flight next (reordering), and sometimes keeps a copy
  to deliver again later (duplication);
- delivers part of a batch, putting back or losing the rest;
- groups several batches for one receiver into one commit;
- loses batches and acks (the sender then resends its unacked productions,
  which is a redelivery of the same production ids);
- replays already-acked source records (an injector that lost its position);
- "crashes" ``counts`` or ``totals``: closes the store, reopens it, builds a
  new processor at ``owner_epoch + 1`` and resends its outbox, while batches
  of the dead incarnation are still in flight (they must be rejected as a
  stale sender epoch, or be harmless duplicates);
- advances the low watermarks (computed exactly as the authority does, from
  the source and each interval's oldest work) and fires timers, sometimes a
  few at a time, at random points.

Phase 1 runs the chaos with the source watermark capped at a random
checkpoint, then settles (fault-free delivery, resends, timers) at that
checkpoint; phase 2 does the same up to the end of time. At both points the
committed state of both stores (state entries, pending timers, timer-fire
sequence, outbox) and the sink's outputs (deduplicated by record id, as a sink
does) must equal a fault-free run of the same input through
:class:`~computations.testing.TestHarness`, and the sink must hold exactly the
oracle's per-window totals, each window once.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from millrace.computations import MAX_TIME
from tests.randomized_delivery._chaos_network import ChaosRun
from tests.randomized_delivery._comparison import (
    converges_to_fault_free_run,
    divergence,
    fault_free_run,
    matches_oracle,
    no_duplicate_effects,
    snapshot,
)
from tests.randomized_delivery._setup import Event

SEEDS = range(30)
STEPS_PER_PHASE = 200
EVENT_SPAN_MS = 60_000  # six 10 s windows


def generate_events(rng: random.Random) -> list[Event]:
    """30-80 records over 1-6 keys, timestamps anywhere in the first minute."""
    keys = rng.randint(1, 6)
    return [
        (f"e{i:04d}".encode(), f"user{rng.randrange(keys)}".encode(), rng.randrange(EVENT_SPAN_MS))
        for i in range(rng.randint(30, 80))
    ]


def run_seed(seed: int, root: Path) -> Counter[str]:
    """One randomized run; asserts every invariant and returns what chaos happened."""
    rng = random.Random(seed)
    events = generate_events(rng)
    checkpoint = rng.randrange(5_000, EVENT_SPAN_MS - 5_000)
    reference_mid, reference_end = fault_free_run(events, checkpoint)
    assert matches_oracle(reference_end.sink, events)

    run = ChaosRun(seed, events, root)
    try:
        run.chaos(checkpoint, STEPS_PER_PHASE)
        run.settle(checkpoint)
        mid = snapshot(run.processors(), run.sink)
        run.chaos(MAX_TIME, STEPS_PER_PHASE)
        run.settle(MAX_TIME)
        end = snapshot(run.processors(), run.sink)
    finally:
        run.close()

    where = f"seed {seed}, checkpoint {checkpoint}; last actions: {run.trace[-30:]}"
    assert converges_to_fault_free_run(mid, reference_mid), (
        f"at the checkpoint: {divergence(mid, reference_mid)}\n{where}"
    )
    assert converges_to_fault_free_run(end, reference_end), (
        f"at the end: {divergence(end, reference_end)}\n{where}"
    )
    assert no_duplicate_effects(end.sink), where
    assert matches_oracle(end.sink, events), where
    assert end.timers == {"counts": [], "totals": []} and end.outbox == {"counts": [], "totals": []}
    assert len(end.sink) > 0
    return run.stats


@pytest.mark.parametrize("seed", SEEDS)
def test_chaotic_delivery_converges_to_the_fault_free_run(seed: int, tmp_path: Path) -> None:
    """Reordered, duplicated, partial, lost and resent batches, crashes of either stage and
    watermarks at random points: the same state and outputs as without faults."""
    stats = run_seed(seed, tmp_path)
    # The chaos of this seed actually happened.
    for kind in ("reordered", "duplicated", "resent", "duplicates_dropped", "timers_fired"):
        assert stats[kind] > 0, (kind, stats)
    assert stats["crashes_counts"] >= 2 and stats["crashes_totals"] >= 2, stats


FAULT_KINDS = (
    "reordered",
    "duplicated",
    "partial",
    "group_commits",
    "lost_batches",
    "lost_acks",
    "resent",
    "replayed",
    "crashes_counts",
    "crashes_totals",
    "zombie_batches_rejected",
    "acks_for_dead_incarnation",
    "duplicates_dropped",
    "sink_duplicates",
    "timer_fires_cut_short",
)


def test_every_kind_of_fault_was_exercised(tmp_path: Path) -> None:
    """Over the first seeds, every fault the network injects happened at least once
    (re-runs them, so it holds under any test selection or order)."""
    totals: Counter[str] = Counter()
    for seed in list(SEEDS)[:5]:
        totals.update(run_seed(seed, tmp_path / str(seed)))
    missing = [kind for kind in FAULT_KINDS if totals[kind] == 0]
    assert not missing, (missing, totals)
