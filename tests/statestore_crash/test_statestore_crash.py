"""Crash atomicity of the RocksDB state store, proven with real processes.

``tests/statestore_crash/crash_writer.py`` commits numbered transactions in an endless loop;
each one touches every column family (state, dedup ids, timers, outbox,
metadata) in one ``commit()``. The tests SIGKILL the writer at random
instants -- before, inside and after ``commit()`` -- reopen the store in the
test process and check the invariants of an atomic, durable commit:

- :func:`transaction_is_all_or_nothing`: every effect of transaction ``i``
  (its state keys, its dedup id, its outbox production, its timer, the
  metadata) tells the same story: either ``i`` committed or it did not.
  Effects a later transaction undoes are judged with that in mind: ``p:{i}``
  must be gone once ``i + 2`` committed and the timer ``k:{i}`` once
  ``i + 1`` committed.
- :func:`values_are_intact`: no value is torn or misplaced.
- :func:`committed_set_is_prefix`: the committed transactions are exactly
  ``0..M``; no hole, nothing past a hole.
- :func:`metadata_matches_newest`: the overwritten ``count`` key and the
  ``last`` metadata both say ``M``.
- :func:`no_stray_entries`: nothing else is in the store: one timer, at most
  two productions, no unknown state key, and the counters the store
  recovers on open agree.
- :func:`committed_transactions_survive`: every transaction the writer saw
  ``commit()`` return for is ``<= M``, and ``M`` never goes backwards.
- :func:`nothing_unattempted_appears`: ``M`` is no newer than the last
  transaction the writer began to commit.

The quicker test checks that the dedup knowledge survives a kill: after
reopening, every committed record id is reported seen by
``store.begin().seen(...)`` and is held by the rebuilt Bloom filters.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from tests.statestore_crash._store_checks import StoreView, check_store, read_store, reopen
from tests.statestore_crash._writer_runs import (
    KILLS,
    MIN_KILLS,
    MIN_TRANSACTIONS,
    SURVIVAL_SAMPLE,
    Kill,
    kill_delay,
    run_and_kill,
)
from tests.statestore_crash.crash_writer import (
    COUNT_KEY,
    EXTRA_KEYS,
    LAST_META,
    decode_index,
    encode_index,
    payload,
    production_id,
    rid,
    stage,
    state_value,
)


def test_checker_detects_a_torn_transaction(tmp_path: Path) -> None:
    """The predicates accept clean stores and reject each kind of partial commit."""
    store = reopen(tmp_path / "store")
    try:
        assert check_store(read_store(store, 3, None)) == []
        for i in range(6):
            txn = store.begin()
            stage(txn, i)
            txn.commit()
        assert check_store(read_store(store, 8, None)) == []
        assert check_store(read_store(store, 8, [0, 5, 6])) == []

        def tear(change: Callable[[StoreView], StoreView]) -> list[str]:
            return check_store(change(read_store(store, 8, None)))

        def drop_extra(view: StoreView) -> StoreView:
            view.txns[3] = replace(view.txns[3], extras=EXTRA_KEYS - 1)
            return view

        def unseen(view: StoreView) -> StoreView:
            view.txns[4] = replace(view.txns[4], seen=False)
            return view

        def kept_production(view: StoreView) -> StoreView:
            view.outbox[production_id(2)] = payload(2)
            view.txns[2] = replace(view.txns[2], outbox=payload(2))
            return view

        def kept_timer(view: StoreView) -> StoreView:
            view.txns[4] = replace(view.txns[4], timer=4)
            return view

        def future_state(view: StoreView) -> StoreView:
            view.txns[7] = replace(view.txns[7], state=state_value(7))
            return view

        def stale_counter(view: StoreView) -> StoreView:
            view.count = 4
            return view

        for change in (
            drop_extra,
            unseen,
            kept_production,
            kept_timer,
            future_state,
            stale_counter,
        ):
            assert tear(change), f"{change.__name__} went unnoticed"
        lost = Kill(begun=(6,), committed=(6,))
        assert check_store(read_store(store, 8, None), lost, 5)
    finally:
        store.close()


@pytest.mark.slow
def test_sigkill_never_tears_or_loses_a_commit(tmp_path: Path) -> None:
    """SIGKILL the writer at least 30 times at random points; every reopen is consistent."""
    rng = random.Random(20240611)
    sampler = random.Random(1)
    store_dir = tmp_path / "store"
    newest = -1
    inside_commit = committed_unreported = between_commits = 0
    started = time.monotonic()
    for round_no in range(KILLS):
        run_from = newest + 1
        kill = run_and_kill(store_dir, kill_delay(rng), tmp_path / f"writer-{round_no}.err")
        store = reopen(store_dir)
        try:
            horizon = max(kill.last_begun, newest) + 2
            window = set(range(max(run_from - 2, 0), horizon + 1))
            window |= set(sampler.sample(range(run_from), min(SURVIVAL_SAMPLE, run_from)))
            view = read_store(store, horizon, window)
            failures = check_store(view, kill, newest)
            assert not failures, f"after kill {round_no}:\n" + "\n".join(failures[:20])
        finally:
            store.close()
        if kill.last_begun > kill.last_committed:
            if view.newest == kill.last_begun:
                committed_unreported += 1
            else:
                inside_commit += 1
        else:
            between_commits += 1
        newest = view.newest
    kills = inside_commit + committed_unreported + between_commits
    store = reopen(store_dir)
    try:
        final = read_store(store, newest + 2, None)
        failures = check_store(final, None, newest)
        assert not failures, "final full check:\n" + "\n".join(failures[:20])
    finally:
        store.close()
    elapsed = time.monotonic() - started
    print(
        f"\n{kills} kills in {elapsed:.1f} s, {newest + 1} transactions committed; kills landed "
        f"inside commit() before it was durable: {inside_commit}, after it was durable but "
        f"before it returned: {committed_unreported}, between commits: {between_commits}"
    )
    assert kills >= MIN_KILLS
    assert newest + 1 >= MIN_TRANSACTIONS, f"only {newest + 1} transactions committed"
    assert inside_commit + committed_unreported > 0, "no kill landed inside commit()"
    shutil.rmtree(store_dir)


@pytest.mark.slow
def test_dedup_knowledge_survives_sigkill(tmp_path: Path) -> None:
    """After each kill, every committed record id is seen and in the rebuilt Bloom filters.

    The writer itself checks ``seen`` after every restart too (it exits with
    an error if ``rid(i - 1)`` is unknown), so each round exercises a rebuild
    in the writer and one in the test process.
    """
    rng = random.Random(7)
    store_dir = tmp_path / "store"
    newest = -1
    for round_no in range(4):
        kill = run_and_kill(store_dir, rng.uniform(0.05, 0.15), tmp_path / f"w{round_no}.err")
        store = reopen(store_dir)
        try:
            last = decode_index(store.get_meta(LAST_META))
            assert last is not None, "nothing committed"
            newest = last
            assert newest >= kill.last_committed, "a reported commit was lost"
            assert store.get(COUNT_KEY) == encode_index(newest)
            committed = [rid(i) for i in range(newest + 1)]
            fresh = [rid(i) for i in range(newest + 1, newest + 201)]
            assert store.recovered_ids == len(committed)
            found = store.dedup.in_filters(committed)
            missing = [r.hex() for r, hit in zip(committed, found, strict=True) if not hit]
            assert not missing, f"{len(missing)} committed ids are in no Bloom filter"
            probe = store.begin()
            assert probe.seen(committed) == [True] * len(committed)
            assert probe.seen(fresh) == [False] * len(fresh)
            probe.abort()
            stats = store.dedup_stats()
            assert stats.confirmations == len(committed)
        finally:
            store.close()
    assert newest >= 4
