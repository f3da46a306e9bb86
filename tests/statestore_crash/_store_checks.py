"""Reading a store the writer left behind, and the invariants of an atomic, durable commit."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from millrace.statestore import StateStore, TimeDomain, Timer
from tests.statestore_crash._writer_runs import CONFIG, Kill
from tests.statestore_crash.crash_writer import (
    COUNT_KEY,
    EXTRA_KEYS,
    LAST_META,
    TIMER_DOMAIN,
    TIMER_TAG,
    decode_index,
    extra_prefix,
    extra_value,
    payload,
    production_id,
    rid,
    state_key,
    state_value,
    timer_key,
)


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
