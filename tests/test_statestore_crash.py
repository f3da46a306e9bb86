"""Crash atomicity of the RocksDB state store, proven with real processes.

``tests/crash_writer.py`` commits numbered transactions in an endless loop;
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

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

import pytest

from statestore import StateStore, StoreConfig, TimeDomain, Timer
from tests.crash_writer import (
    COUNT_KEY,
    EXTRA_KEYS,
    LAST_META,
    TIMER_DOMAIN,
    TIMER_TAG,
    decode_index,
    encode_index,
    extra_prefix,
    extra_value,
    payload,
    production_id,
    rid,
    stage,
    state_key,
    state_value,
    timer_key,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
WRITER = Path(__file__).resolve().with_name("crash_writer.py")

KILLS = 40
"""Kills of the main test; :data:`MIN_KILLS` is the least that proves anything."""
MIN_KILLS = 30
MIN_TRANSACTIONS = 100
"""A store with fewer committed transactions at the end proves too little."""
KILL_DELAY_S = (0.020, 0.300)
"""A kill lands this long after the writer's first ``committed`` line (log-uniform)."""
SURVIVAL_SAMPLE = 64
"""Older transactions whose extra keys are re-read after every kill (all at the end)."""
STARTUP_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0
CONFIG = StoreConfig(sync=True)


# ---------------------------------------------------------------------------
# Running and killing the writer
# ---------------------------------------------------------------------------


class WriterOutput:
    """Reads the writer's stdout on a thread and records every transaction it reports."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.begun: list[int] = []
        self.committed: list[int] = []
        self.unexpected: list[str] = []
        self.first_commit = threading.Event()
        self.settled = threading.Event()
        """Set at the first ``committed`` line or at end of file, whichever comes first."""
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            word, _, number = line.partition(" ")
            if word == "begin" and number.isdigit():
                self.begun.append(int(number))
            elif word == "committed" and number.isdigit():
                self.committed.append(int(number))
                self.first_commit.set()
                self.settled.set()
            else:
                self.unexpected.append(line)
        self.settled.set()

    def join(self) -> None:
        """Wait for end of file (the pipe closes when the killed writer is reaped)."""
        self._thread.join(EXIT_TIMEOUT_S)
        assert not self._thread.is_alive(), "the writer's stdout never reached end of file"


@dataclass(frozen=True)
class Kill:
    """What one writer process reported before it was killed."""

    begun: tuple[int, ...]
    committed: tuple[int, ...]

    @property
    def last_committed(self) -> int:
        """The newest transaction the writer saw ``commit()`` return for, or -1."""
        return max(self.committed, default=-1)

    @property
    def last_begun(self) -> int:
        """The newest transaction the writer began to commit, or -1."""
        return max(self.begun, default=-1)


def run_and_kill(store_dir: Path, delay_s: float, stderr_path: Path) -> Kill:
    """Start the writer, SIGKILL it ``delay_s`` after its first commit, reap it."""
    with stderr_path.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(WRITER), str(store_dir)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
        )
    try:
        assert child.stdout is not None
        output = WriterOutput(child.stdout)
        output.settled.wait(STARTUP_TIMEOUT_S)
        started = output.first_commit.is_set()
        if started:
            time.sleep(delay_s)
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait(EXIT_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output.join()
    child_stderr = stderr_path.read_text(errors="replace")
    assert returncode == -signal.SIGKILL, (
        f"the writer exited by itself with {returncode}:\n{child_stderr}"
    )
    assert started, f"the writer committed nothing in {STARTUP_TIMEOUT_S} s:\n{child_stderr}"
    assert not output.unexpected, f"unexpected writer output: {output.unexpected[:5]}"
    return Kill(begun=tuple(output.begun), committed=tuple(output.committed))


def kill_delay(rng: random.Random) -> float:
    """A log-uniform delay in :data:`KILL_DELAY_S`: short and long runs alike."""
    low, high = KILL_DELAY_S
    return float(low * (high / low) ** rng.random())


# ---------------------------------------------------------------------------
# What the reopened store holds
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TxnView:
    """The traces of transaction ``index`` found in the store.

    ``extras`` counts the keys ``x:{index}:*``; None when they were not read
    this round. ``extras_intact`` is False when one of them has a wrong name
    or value.
    """

    index: int
    state: bytes | None
    extras: int | None
    extras_intact: bool
    seen: bool
    outbox: bytes | None
    timer: int | None


@dataclass
class StoreView:
    """Everything the checks need from a reopened store, read once."""

    txns: dict[int, TxnView]
    count: int | None
    last: int | None
    outbox: dict[bytes, bytes]
    event_timers: list[Timer]
    other_timers: list[Timer]
    pending_timers: int
    outbox_size: int
    stray_state: list[bytes] = field(default_factory=list)

    @property
    def horizon(self) -> int:
        """The highest transaction number looked at."""
        return max(self.txns)

    def applied(self, i: int) -> bool:
        """Did transaction ``i`` commit, judged by its witness key ``s:{i}``."""
        view = self.txns.get(i)
        return view is not None and view.state is not None

    @property
    def newest(self) -> int:
        """``M``: the newest committed transaction (by witness key), or -1."""
        return max((i for i in self.txns if self.applied(i)), default=-1)


def count_extras(i: int, entries: Iterable[tuple[bytes, bytes]]) -> tuple[int, bool]:
    """How many ``x:{i}:*`` entries there are, and whether all have the expected name/value."""
    prefix = extra_prefix(i)
    found = 0
    intact = True
    for key, value in entries:
        found += 1
        suffix = key[len(prefix) :]
        j = int(suffix) if suffix.isdigit() else -1
        intact = intact and 0 <= j < EXTRA_KEYS and value == extra_value(i, j)
    return found, intact


def parse_state_key(key: bytes) -> tuple[str, int] | None:
    """``(kind, i)`` for ``s:{i}`` and ``x:{i}:{j}`` keys, else None."""
    parts = key.split(b":")
    if parts[0] == b"s" and len(parts) == 2 and parts[1].isdigit():
        return "s", int(parts[1])
    if parts[0] == b"x" and len(parts) == 3 and parts[1].isdigit():
        return "x", int(parts[1])
    return None


def read_store(store: StateStore, horizon: int, extras_for: Iterable[int] | None) -> StoreView:
    """Read transactions ``0..horizon``.

    ``extras_for`` names the transactions whose extra keys are read (by prefix
    scans); None reads the whole state column family in one scan and also
    reports every key no transaction up to ``horizon`` wrote.
    """
    indices = range(horizon + 1)
    states = dict(store.scan_state(b"s:"))
    extras: dict[int, tuple[int, bool]] = {}
    stray: list[bytes] = []
    if extras_for is None:
        grouped: dict[int, list[tuple[bytes, bytes]]] = {}
        for key, value in store.scan_state(b""):
            parsed = parse_state_key(key)
            if parsed is not None and parsed[1] <= horizon:
                if parsed[0] == "x":
                    grouped.setdefault(parsed[1], []).append((key, value))
            elif key != COUNT_KEY:
                stray.append(key)
        extras = {i: count_extras(i, grouped.get(i, [])) for i in indices}
    else:
        for i in extras_for:
            if 0 <= i <= horizon:
                extras[i] = count_extras(i, store.scan_state(extra_prefix(i)))
        for key in states:
            parsed = parse_state_key(key)
            if parsed is None or parsed[1] > horizon:
                stray.append(key)
    probe = store.begin()
    seen = probe.seen([rid(i) for i in indices])
    probe.abort()
    outbox = dict(store.outbox())
    txns = {
        i: TxnView(
            index=i,
            state=states.get(state_key(i)),
            extras=extras[i][0] if i in extras else None,
            extras_intact=extras[i][1] if i in extras else True,
            seen=seen[i],
            outbox=outbox.get(production_id(i)),
            timer=store.get_timer(TIMER_DOMAIN, timer_key(i), TIMER_TAG),
        )
        for i in indices
    }
    known_outbox = {production_id(i) for i in indices}
    timers = store.due_timers(TIMER_DOMAIN, None)
    other_domains = [domain for domain in TimeDomain if domain is not TIMER_DOMAIN]
    return StoreView(
        txns=txns,
        count=decode_index(store.get(COUNT_KEY)),
        last=decode_index(store.get_meta(LAST_META)),
        outbox=outbox,
        event_timers=timers,
        other_timers=[t for d in other_domains for t in store.due_timers(d, None)],
        pending_timers=store.pending_timers,
        outbox_size=store.outbox_count(),
        stray_state=stray + [key for key in outbox if key not in known_outbox],
    )


# ---------------------------------------------------------------------------
# The invariants, as named predicates
# ---------------------------------------------------------------------------


def effects_of(view: StoreView, i: int) -> dict[str, bool | None]:
    """Per effect of transaction ``i``: does the store show it (None: partly)?

    An effect a later transaction undoes is only judged while that later
    transaction is not committed; once it is, the effect's absence is judged
    as part of the later transaction instead.
    """
    txn = view.txns[i]
    effects: dict[str, bool | None] = {
        f"state s:{i}": txn.state is not None,
        f"dedup rid({i})": txn.seen,
        "state count >= i": view.count is not None and view.count >= i,
        "meta last >= i": view.last is not None and view.last >= i,
    }
    if txn.extras is not None:
        whole = {0: False, EXTRA_KEYS: True}
        effects[f"{EXTRA_KEYS} keys x:{i}:*"] = whole.get(txn.extras)
    if not view.applied(i + 2):
        effects[f"outbox p:{i} added"] = txn.outbox is not None
    if i >= 2 and view.applied(i - 2):
        effects[f"outbox p:{i - 2} removed"] = view.txns[i - 2].outbox is None
    if not view.applied(i + 1):
        effects[f"timer k:{i} set"] = txn.timer is not None
    if i >= 1 and view.applied(i - 1):
        effects[f"timer k:{i - 1} deleted"] = view.txns[i - 1].timer is None
    return effects


def transaction_is_all_or_nothing(view: StoreView, i: int) -> bool:
    """Every effect of transaction ``i`` is present, or none is; none is half-present."""
    shown = set(effects_of(view, i).values())
    return None not in shown and len(shown) == 1


def values_are_intact(view: StoreView, i: int) -> bool:
    """Whatever transaction ``i`` left has exactly the bytes it wrote."""
    txn = view.txns[i]
    return (
        txn.state in (None, state_value(i))
        and txn.extras_intact
        and txn.outbox in (None, payload(i))
        and txn.timer in (None, i)
    )


def committed_set_is_prefix(view: StoreView) -> bool:
    """The committed transactions are exactly ``0..M``."""
    committed = [i for i in view.txns if view.applied(i)]
    return committed == list(range(view.newest + 1))


def metadata_matches_newest(view: StoreView) -> bool:
    """The overwritten ``count`` key and the ``last`` metadata both name ``M``."""
    expected = None if view.newest < 0 else view.newest
    return view.count == expected and view.last == expected


def no_stray_entries(view: StoreView) -> bool:
    """Only ``M``'s timer and ``M - 1``'s and ``M``'s productions are left; counters agree."""
    newest = view.newest
    live = [i for i in (newest - 1, newest) if i >= 0]
    timers = (
        [Timer(domain=TIMER_DOMAIN, key=timer_key(newest), tag=TIMER_TAG, time_ms=newest)]
        if newest >= 0
        else []
    )
    return (
        not view.stray_state
        and set(view.outbox) == {production_id(i) for i in live}
        and view.outbox_size == len(view.outbox)
        and view.event_timers == timers
        and not view.other_timers
        and view.pending_timers == len(timers)
    )


def committed_transactions_survive(view: StoreView, kill: Kill, previous_newest: int) -> bool:
    """Every commit the writer saw return is kept, and ``M`` never goes backwards."""
    return view.newest >= kill.last_committed and view.newest >= previous_newest


def nothing_unattempted_appears(view: StoreView, kill: Kill, previous_newest: int) -> bool:
    """``M`` is no newer than the last transaction anyone began to commit."""
    return view.newest <= max(kill.last_begun, previous_newest)


def check_store(view: StoreView, kill: Kill | None = None, previous_newest: int = -1) -> list[str]:
    """Every violated invariant, described; empty when the store is consistent."""
    failures: list[str] = []
    per_txn: list[tuple[str, Callable[[StoreView, int], bool]]] = [
        ("transaction_is_all_or_nothing", transaction_is_all_or_nothing),
        ("values_are_intact", values_are_intact),
    ]
    for i in view.txns:
        for name, predicate in per_txn:
            if not predicate(view, i):
                failures.append(f"{name}({i}): {effects_of(view, i)} {view.txns[i]}")
    newest = view.newest
    if not committed_set_is_prefix(view):
        committed = [i for i in view.txns if view.applied(i)]
        holes = sorted(set(range(newest + 1)) - set(committed))
        failures.append(f"committed_set_is_prefix: M={newest}, missing {holes[:10]}")
    if not metadata_matches_newest(view):
        failures.append(f"metadata_matches_newest: M={newest} count={view.count} last={view.last}")
    if not no_stray_entries(view):
        failures.append(
            f"no_stray_entries: M={newest} outbox={sorted(view.outbox)} "
            f"(size {view.outbox_size}) timers={view.event_timers} {view.other_timers} "
            f"(pending {view.pending_timers}) stray={view.stray_state[:10]}"
        )
    if kill is not None:
        if not committed_transactions_survive(view, kill, previous_newest):
            failures.append(
                f"committed_transactions_survive: M={newest} but the writer saw commit "
                f"{kill.last_committed} return (M before this run: {previous_newest})"
            )
        if not nothing_unattempted_appears(view, kill, previous_newest):
            failures.append(
                f"nothing_unattempted_appears: M={newest} but the writer only began "
                f"{kill.last_begun}"
            )
    return failures


def reopen(store_dir: Path) -> StateStore:
    """Open the store the killed writer left; the kernel dropped its lock with the process."""
    return StateStore.open_rocksdb(store_dir, config=CONFIG)


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------


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
            filters = [f.bloom for chain in store.dedup.segment_filters().values() for f in chain]
            missing = [r.hex() for r in committed if not any(r.hex() in f for f in filters)]
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
