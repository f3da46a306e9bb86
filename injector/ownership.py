"""``OwnershipRegistry``: which node owns which key interval, under which epoch.

A node registers the intervals it is placed on; each registration of an
interval hands out the next epoch for it: above the registry's own record,
above the epoch the node's store already claimed (the node shows it), and
above any epoch other journals saw (:meth:`OwnershipRegistry.raise_floor`).
Epochs are never reused: the registry is journaled durably before it
answers, twice (``ownership.json`` and ``epochs.json``, each replaced durably
before the answer), so whichever single file is lost (and the watermark journal
holds the epochs that reported), a registration is never handed an epoch a
zombie already holds. A newer epoch fences every older owner:
receivers refuse its deliveries, its store refuses its commits, and a node
that sees its interval leased at a newer epoch in ``WatchAssignment`` fences
itself.

An interval can move to another node of its computation (:meth:`move`): the registry
records the move in both files before it answers, and from then on leases the interval
only to that node (a node that claims it otherwise is told it moved away). The node it
moves to takes the state from the current owner and registers it at a new epoch, which
fences the old owner; the move stays recorded, as that interval's placement, until the
interval moves again. A node being drained (:meth:`drain`) has each of its intervals
moved away at once and takes none until it is resumed; the registry keeps the
newest changes (:attr:`changes`) for ``millrace status``.

An interval can split into its two halves (:meth:`split`): the registry records the
computation's new layout (in both files) and retires the interval -- its lease goes,
its epoch stays as a floor, nobody registers it again -- and places both halves on the
node that held it, which cuts its store in two and registers each half at an epoch
above the interval's. Two halves on one node merge back (:meth:`merge`) the same way.
Intervals are named by id (:meth:`computations.KeyInterval.id`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from millrace.computations import IntervalId, KeyInterval, Layout, Topology
from millrace.deployment import brief
from millrace.injector._ownership_files import (
    EPOCHS_FILE,
    Journaled,
    Lease,
    read_epochs,
    read_ownership,
    write_epochs,
    write_ownership,
)
from millrace.statestore import MAX_EPOCH

__all__ = ["EPOCHS_FILE", "LayoutChange", "Lease", "OwnershipRegistry"]

MAX_NAME = 256
"""Longest node id or address a registration may carry."""


@dataclass(frozen=True, slots=True)
class LayoutChange:
    """One recorded move of an interval."""

    at_ms: int
    computation: str
    index: int
    from_node: str
    """The node holding its lease when the move was recorded ("" if none)."""
    to_node: str
    reason: str
    """"operator", "drain" or "rebalance: ..." (the loads that decided it)."""


MAX_CHANGES = 100
"""How many of the newest changes the registry keeps in memory."""


class OwnershipRegistry:
    """Thread-safe leases with a durable journal."""

    def __init__(
        self,
        topology: Topology,
        journal_path: Path,
        *,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        """``journal_path``: ``ownership.json``; the second record of the epochs granted
        (``epochs.json``) lives beside it. ``clock``: when changes happen (ms)."""
        self._topology = topology
        self._clock = clock
        self.changes: deque[LayoutChange] = deque(maxlen=MAX_CHANGES)
        """The newest moves recorded since the registry started, oldest first."""
        self.changes_recorded = 0
        """How many moves were recorded since the registry started."""
        self.moves_by_reason: Counter[tuple[str, str]] = Counter()
        """(computation, "operator" | "drain" | "rebalance") -> moves recorded."""
        self._draining: set[str] = set()
        self._path = journal_path
        self._epochs_path = journal_path.with_name(EPOCHS_FILE)
        self._cond = threading.Condition()
        self._leases: dict[IntervalId, Lease] = {}
        self._floors: dict[IntervalId, int] = {}
        self._moved: dict[IntervalId, str] = {}
        self._layouts: dict[str, Layout] = {
            name: Layout.base(name, spec.intervals) for name, spec in topology.computations.items()
        }
        self.version = 0
        if journal_path.exists():
            journaled = read_ownership(journal_path, topology)
            self._leases.update(journaled.leases)
            self.version = journaled.version
            self._moved.update(journaled.moved)
            self._draining.update(journaled.draining)
            self._layouts.update(journaled.layouts)
            for (computation, index), epoch in journaled.floors.items():
                self.raise_floor(computation, index, epoch)
        epochs = read_epochs(self._epochs_path, topology)
        if not journal_path.exists():
            self._layouts.update(epochs.layouts)
        self._draining.update(epochs.draining)
        for (computation, index), epoch in epochs.floors.items():
            self.raise_floor(computation, index, epoch)
        for key, node_id in epochs.moved.items():
            self._moved.setdefault(key, node_id)
        self.lost = self._lost_file()
        """The registry file found missing at start (its twin still had epochs), or None."""

    def register(
        self,
        node_id: str,
        computation: str,
        address: str,
        indexes: Iterable[int],
        stored_epochs: Mapping[int, int] | None = None,
    ) -> list[Lease]:
        """Lease ``indexes`` of ``computation`` to ``node_id`` at fresh epochs (durably).

        Each epoch is above the interval's last lease, above its floor and above
        ``stored_epochs[index]``, the epoch the node's store claimed already.
        Raises ``ValueError`` (nothing is leased) for an unknown computation or
        interval, or a stored epoch outside ``0..MAX_EPOCH - 1``.
        """
        spec = self._topology.computations.get(computation)
        if spec is None:
            raise ValueError(f"unknown computation {brief(computation)}")
        if not node_id or len(node_id) > MAX_NAME:
            raise ValueError(f"node_id must have 1..{MAX_NAME} characters, not {len(node_id)}")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or len(address) > MAX_NAME:
            raise ValueError(f"address {brief(address)} is not HOST:PORT")
        wanted = list(indexes)
        if not wanted or len(set(wanted)) != len(wanted):
            raise ValueError(f"interval_indexes must name each interval once, got {wanted[:20]}")
        shown = dict(stored_epochs or {})
        with self._cond:
            current = set(self._layouts[computation].ids())
        for index in wanted:
            if index not in current:
                raise ValueError(f"{computation!r} has no interval {index} (now)")
        for index, epoch in shown.items():
            if not 0 <= epoch < MAX_EPOCH:
                raise ValueError(
                    f"stored epoch {epoch} of {computation}/{index} is outside 0..{MAX_EPOCH - 1}"
                )
        granted: list[Lease] = []
        with self._cond:
            leases = dict(self._leases)
            for index in wanted:
                key = IntervalId(computation, index)
                if self._moved.get(key, node_id) != node_id or (
                    node_id in self._draining and key not in self._moved
                ):
                    continue  # moved to another node (see moved_away), or draining
                previous = leases.get(key)
                known = max(
                    0 if previous is None else previous.epoch,
                    self._floors.get(key, 0),
                    shown.get(index, 0),
                )
                lease = Lease(computation, index, spec.intervals, known + 1, node_id, address)
                leases[key] = lease
                granted.append(lease)
            if not granted:
                return granted
            # Durable before anyone sees it: a lease lost in a crash was never granted.
            self._commit(leases, self._moved)
        return granted

    def move(
        self, computation: str, index: int, node_id: str, *, reason: str = "operator"
    ) -> Lease | None:
        """Record (durably) that ``computation``/``index`` runs on ``node_id`` from now
        on; returns its current lease (None if never leased). Raises ``ValueError`` for
        an unknown interval, a bad node id or a node being drained."""
        self._check_interval(computation, index)
        if not node_id or len(node_id) > MAX_NAME:
            raise ValueError(f"node_id must have 1..{MAX_NAME} characters, not {len(node_id)}")
        with self._cond:
            if node_id in self._draining:
                raise ValueError(f"node {node_id} is being drained: it takes no interval")
            key = IntervalId(computation, index)
            maker = self._maker(key)
            if maker not in (None, node_id):
                raise ValueError(
                    f"{computation}/{index} is being made on {maker} (a split or a merge "
                    "placed it there): it can move once that node has registered it"
                )
            if self._moved.get(key) != node_id:
                self._commit(self._leases, {**self._moved, key: node_id})
                self._note_change(key, node_id, reason)
            return self._leases.get(key)

    def drain(self, node_id: str, moves: Mapping[IntervalId, str]) -> None:
        """Record (durably, at once) that ``node_id`` is drained and each interval of
        ``moves`` moves to the node given; from then on ``node_id`` is leased nothing."""
        for (computation, index), to in moves.items():
            self._check_interval(computation, index)
            if to == node_id:
                raise ValueError(f"a drain cannot move {computation}/{index} to {node_id} itself")
        with self._cond:
            unavailable = sorted(set(moves.values()) & self._draining)
            if unavailable:
                raise ValueError(f"nodes {unavailable} are being drained themselves")
            unmade = sorted(f"{key}" for key in moves if self._maker(key) is not None)
            if unmade:
                raise ValueError(
                    f"{', '.join(unmade)} are being made on {node_id} (a split or a merge "
                    "placed them there): drain it once it has registered them"
                )
            self._commit(self._leases, {**self._moved, **moves}, self._draining | {node_id})
            for key, to in sorted(moves.items()):
                self._note_change(key, to, "drain")

    def resume(self, node_id: str) -> None:
        """``node_id`` may take intervals again (durably); nothing moves back by itself."""
        with self._cond:
            if node_id in self._draining:
                self._commit(self._leases, self._moved, self._draining - {node_id})

    def draining(self) -> frozenset[str]:
        """The nodes being drained."""
        with self._cond:
            return frozenset(self._draining)

    def _check_interval(self, computation: str, index: int) -> None:
        if computation not in self._topology.computations:
            raise ValueError(f"unknown computation {brief(computation)}")
        with self._cond:
            if index not in self._layouts[computation].ids():
                raise ValueError(f"{computation!r} has no interval {index} (now)")

    def layout(self, computation: str) -> Layout:
        """The intervals of ``computation`` now."""
        with self._cond:
            return self._layouts[computation]

    def split(
        self, computation: str, index: int, *, reason: str = "operator"
    ) -> tuple[KeyInterval, KeyInterval]:
        """Record (durably) that interval ``index`` splits into its halves, both placed on
        the node holding its lease; returns the halves. Raises ``ValueError`` for an
        unknown interval, one never leased, moving, or too small to split."""
        self._check_interval(computation, index)
        spec = self._topology.computations[computation]
        key = IntervalId(computation, index)
        with self._cond:
            lease = self._leases.get(key)
            if lease is None:
                raise ValueError(f"{computation}/{index} was never leased: nothing to split")
            if self._moved.get(key, lease.node_id) != lease.node_id:
                raise ValueError(f"{computation}/{index} is moving to {self._moved[key]}")
            if lease.node_id in self._draining:
                raise ValueError(f"{computation}/{index} is on {lease.node_id}, being drained")
            interval = KeyInterval.of_id(computation, index, spec.intervals)
            halves = interval.halves()
            layout = self._layouts[computation].split(interval)
            leases = {k: v for k, v in self._leases.items() if k != key}
            moved = {k: v for k, v in self._moved.items() if k != key}
            for half in halves:
                moved[half.named(spec.intervals)] = lease.node_id
                self._floors[half.named(spec.intervals)] = lease.epoch
            self._floors[key] = max(self._floors.get(key, 0), lease.epoch)
            self._commit(leases, moved, layouts={**self._layouts, computation: layout})
            self._note_change(key, lease.node_id, f"split: {reason}", from_node=lease.node_id)
        return halves

    def merge(self, computation: str, index: int, *, reason: str = "operator") -> KeyInterval:
        """Record (durably) that interval ``index`` and its other half merge back into the
        interval they were split from, placed on the node holding both; returns it.
        Raises ``ValueError`` for an unknown interval, one of the first intervals, one
        whose other half is split, not leased, moving or on another node."""
        self._check_interval(computation, index)
        base = self._topology.computations[computation].intervals
        half = KeyInterval.of_id(computation, index, base)
        whole, other = half.whole(base), half.other_half(base)
        if whole is None or other is None:
            raise ValueError(f"{computation}/{index} is one of the first intervals")
        with self._cond:
            keys = [half.named(base), other.named(base)]
            if other not in self._layouts[computation].intervals:
                raise ValueError(f"{computation}/{keys[1].id}, the other half, is split")
            leases = [self._leases.get(key) for key in keys]
            holders = {lease.node_id for lease in leases if lease is not None}
            if None in leases or len(holders) != 1:
                raise ValueError(
                    f"{computation}/{keys[0].id} and /{keys[1].id} must both run on one node "
                    f"to merge (now: {sorted(holders) or 'not leased'}); move one first"
                )
            node = holders.pop()
            if any(self._moved.get(key, node) != node for key in keys):
                raise ValueError(f"{computation}/{index} or its other half is moving")
            if node in self._draining:
                raise ValueError(f"{computation}/{index} is on {node}, being drained")
            whole_key = whole.named(base)
            layout = self._layouts[computation].merge(half)
            epochs = [lease.epoch for lease in leases if lease is not None]
            for key, epoch in zip(keys, epochs, strict=True):
                self._floors[key] = max(self._floors.get(key, 0), epoch)
            self._floors[whole_key] = max(self._floors.get(whole_key, 0), *epochs)
            remaining = {k: v for k, v in self._leases.items() if k not in keys}
            moved = {k: v for k, v in self._moved.items() if k not in keys}
            moved[whole_key] = node
            self._commit(remaining, moved, layouts={**self._layouts, computation: layout})
            self._note_change(whole_key, node, f"merge: {reason}", from_node=node)
        return whole

    def _note_change(
        self, key: IntervalId, to: str, reason: str, *, from_node: str | None = None
    ) -> None:
        """Remember a recorded change (lock held)."""
        if from_node is None:
            lease = self._leases.get(key)
            from_node = "" if lease is None else lease.node_id
        self.changes.append(LayoutChange(self._clock(), *key, from_node, to, reason))
        self.changes_recorded += 1
        self.moves_by_reason[(key[0], reason.partition(":")[0])] += 1

    def unmade(self, computation: str) -> dict[int, str]:
        """The intervals of ``computation`` a split or a merge placed on a node that has
        not registered them yet (their stores are made there, and nowhere else: they
        cannot move until then), with that node."""
        with self._cond:
            return {
                key[1]: maker
                for key in self._moved
                if key[0] == computation and (maker := self._maker(key)) is not None
            }

    def _maker(self, key: IntervalId) -> str | None:
        """(Lock held.) The node making ``key``'s store after a split or a merge, or None
        when it is registered (or was never made by one: a first interval new, whose
        store any node starts empty). Such an interval is in the layout, has no lease
        and a floor (the epochs of the interval(s) it was made from)."""
        if key in self._leases or not self._floors.get(key, 0):
            return None
        computation, index = key
        if index not in self._layouts[computation].ids():
            return None
        return self._moved.get(key)

    def moves(self, computations: Iterable[str] = ()) -> dict[IntervalId, str]:
        """Every recorded move (of ``computations``, or all): interval -> node id."""
        wanted = set(computations)
        with self._cond:
            return {k: v for k, v in self._moved.items() if not wanted or k[0] in wanted}

    def interval_counts(self) -> dict[str, int]:
        """Each computation's interval count."""
        return {name: spec.intervals for name, spec in self._topology.computations.items()}

    def moved_away(self, node_id: str, computation: str, indexes: Iterable[int]) -> list[int]:
        """Those of ``indexes`` that moved to a node other than ``node_id``."""
        with self._cond:
            return [
                i
                for i in indexes
                if self._moved.get(IntervalId(computation, i), node_id) != node_id
            ]

    def _commit(
        self,
        leases: dict[IntervalId, Lease],
        moved: dict[IntervalId, str],
        draining: set[str] | None = None,
        *,
        layouts: dict[str, Layout] | None = None,
    ) -> None:
        """Journal ``leases``, ``moved``, ``draining`` and ``layouts`` (both files; None:
        as they are), then make them current."""
        draining = self._draining if draining is None else draining
        layouts = self._layouts if layouts is None else layouts
        journal = Journaled(
            version=self.version + 1, leases=leases, moved=moved, draining=draining,
            layouts=layouts, floors=self._floors,
        )  # fmt: skip
        write_epochs(self._epochs_path, journal)
        write_ownership(self._path, journal)
        self._leases = leases
        self._moved = moved
        self._draining = draining
        self._layouts = layouts
        self.version += 1
        self._cond.notify_all()

    def raise_floor(self, computation: str, index: int, epoch: int) -> None:
        """Another journal saw ``epoch`` for this interval: never grant it or one below."""
        if computation in self._topology.computations and 0 <= epoch < MAX_EPOCH:
            with self._cond:
                key = IntervalId(computation, index)
                self._floors[key] = max(self._floors.get(key, 0), epoch)

    def leases(self, computations: Iterable[str] = ()) -> tuple[int, list[Lease]]:
        """The current version and leases (of ``computations``, or all)."""
        wanted = set(computations)
        with self._cond:
            chosen = [
                lease
                for lease in self._leases.values()
                if not wanted or lease.computation in wanted
            ]
            return self.version, sorted(chosen, key=lambda lease: (lease.computation, lease.index))

    def epoch_of(self, computation: str, index: int) -> int:
        """The epoch of the current lease of an interval (0 when it was never leased)."""
        with self._cond:
            lease = self._leases.get(IntervalId(computation, index))
            return 0 if lease is None else lease.epoch

    def wait_for_change(self, version: int, timeout: float) -> int:
        """Block until the version differs from ``version`` (or timeout); the version."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != version, timeout)
            return self.version

    def _lost_file(self) -> Path | None:
        has_leases, has_epochs = self._path.exists(), self._epochs_path.exists()
        if has_leases and not has_epochs and self._leases:
            return self._epochs_path
        if has_epochs and not has_leases:
            return self._path
        return None
