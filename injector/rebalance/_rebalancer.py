"""``Rebalancer``: the injector's load policy, run on its ticker (MillWheel's master).

Every ``period_ms`` it looks at each computation whose moves are all done: the live
nodes that are not drained, where each interval runs and the load the nodes report,
and records at most one move or split (:func:`plan_move`) -- or, when nothing needs
balancing, one merge of cold halves or the move that brings them together
(:func:`plan_merge`) -- through the registry, which the nodes then carry out like any
other. An interval splits at most
:data:`MAX_SPLITS_DEEP` times below the computation's first intervals (a hot key
cannot be split; its interval would be split for nothing). It moves no more than
``max_moves_per_minute`` in all, an interval it (or anyone) moved stays put for
``cooldown_ms`` (so do the halves a split made and the interval a merge made), and a
change for load is made only when two looks in a row propose the same kind of change
from the same node to the same node (a load that swings for a moment moves nothing).
A move whose node stopped reporting before it took the interval goes back to the
interval's holder (which runs it, or stopped only to hand it over).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping

from millrace.computations import IntervalId, KeyInterval
from millrace.deployment import NodePlacement, RebalanceSettings
from millrace.injector.ownership import OwnershipRegistry
from millrace.injector.rebalance._layout import interval_places, takers
from millrace.injector.rebalance._loads import LoadTable
from millrace.injector.rebalance._policy import Proposal, plan_merge, plan_move

log = logging.getLogger(__name__)

MAX_SPLITS_DEEP = 3
"""The rebalancer splits no interval smaller than an eighth of a first interval."""


class Rebalancer:
    """Call :meth:`tick` often (every second); it acts every ``period_ms``."""

    def __init__(
        self,
        registry: OwnershipRegistry,
        loads: LoadTable,
        nodes: Mapping[str, NodePlacement],
        settings: RebalanceSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._loads = loads
        self._nodes = nodes
        self._settings = settings
        self._clock = clock
        self._next_at = clock() + settings.period_ms / 1000
        self._recent: deque[float] = deque()
        """When each of the moves of the last minute was recorded."""
        self._moved_at: dict[IntervalId, float] = {}
        self._changes_seen = 0
        self._proposed: dict[str, tuple[str, str, str]] = {}
        """Per computation: the change the last look proposed for load (its kind, from
        and to which node); one is made if this look proposes the same again."""

    def tick(self) -> None:
        """Make at most one move per computation, when the period is up."""
        now = self._clock()
        if now < self._next_at:
            return
        self._next_at = now + self._settings.period_ms / 1000
        self._note_changes(now)
        while self._recent and now - self._recent[0] >= 60:
            self._recent.popleft()
        for computation in sorted({node.computation for node in self._nodes.values()}):
            if len(self._recent) >= self._settings.max_moves_per_minute:
                return
            self._balance(computation, now)

    def _note_changes(self, now: float) -> None:
        """Cool down every interval moved since the last look (by anyone)."""
        changes = list(self._registry.changes)
        recorded = self._registry.changes_recorded
        new = min(recorded - self._changes_seen, len(changes))
        for change in changes[len(changes) - new :]:
            self._moved_at[IntervalId(change.computation, change.index)] = now
            if change.reason.startswith("split:"):  # and the halves it made
                base = self._registry.layout(change.computation).base_count
                parent = KeyInterval.of_id(change.computation, change.index, base)
                for half in parent.halves():
                    self._moved_at[half.named(base)] = now
        self._changes_seen = recorded

    def _balance(self, computation: str, now: float) -> None:
        places = interval_places(self._registry, self._nodes, computation)
        live = takers(self._registry, self._loads, computation)
        for index, place in places.items():
            if place.moving and place.owner not in live and place.holder in live:
                # The node it moves to is down (or never came): the holder, which runs
                # it or stopped only to hand it over, takes it back.
                reason = f"rebalance: {place.owner} stopped reporting"
                back = Proposal(index, place.owner, place.holder, reason, by_load=False)
                self._make(computation, back, now)
                return
        if any(
            place.moving or (not place.holder and place.owner in live) for place in places.values()
        ):
            return  # one change at a time: wait for the moves (and splits) under way
        cooldown_s = self._settings.cooldown_ms / 1000
        unmade = self._registry.unmade(computation)  # made where they are, first
        movable = {
            index
            for index in places
            if now - self._moved_at.get(IntervalId(computation, index), -1e18) >= cooldown_s
            and index not in unmade
        }
        layout = self._registry.layout(computation)
        finest = layout.base_count << MAX_SPLITS_DEEP
        rates = self._loads.rates(computation)
        proposal = plan_move(
            {index: place.owner for index, place in places.items()},
            self._loads.cpu(computation),
            live,
            rates=rates,
            movable=movable,
            imbalance_percent=self._settings.imbalance_percent,
            min_records_per_s=self._settings.min_records_per_s,
            splittable={i.id(layout.base_count) for i in layout if i.count < finest} & movable,
        ) or plan_merge(
            layout,
            {index: place.owner for index, place in places.items() if place.owner in live},
            rates,
            mergeable=movable,
            min_records_per_s=self._settings.min_records_per_s,
        )
        if proposal is None:
            self._proposed.pop(computation, None)
            return
        seen = (proposal.action, proposal.from_node, proposal.to_node)
        if not proposal.by_load or self._proposed.get(computation) == seen:
            self._proposed.pop(computation, None)
            self._make(computation, proposal, now)
        else:
            self._proposed[computation] = seen

    def _make(self, computation: str, proposal: Proposal, now: float) -> None:
        """Record ``proposal`` through the registry (which may refuse it: the layout
        changed meanwhile), and cool down the intervals it made or moved."""
        index, reason = proposal.index, proposal.reason
        base = self._registry.layout(computation).base_count
        try:
            if proposal.action == "split":
                halves = self._registry.split(computation, index, reason=reason)
                made = [half.id(base) for half in halves]
            elif proposal.action == "merge":
                made = [self._registry.merge(computation, index, reason=reason).id(base)]
            else:
                self._registry.move(computation, index, proposal.to_node, reason=reason)
                made = [index]
        except ValueError as exc:  # moved, split or drained meanwhile
            log.info("rebalance %s of %s/%s not made: %s", proposal.action, computation, index, exc)
            return
        self._recent.append(now)
        for ident in made:
            self._moved_at[IntervalId(computation, ident)] = now
        log.info(
            "rebalance %s of %s/%s: %s on %s (%s)", proposal.action, computation, index,
            made, proposal.to_node, reason,
            extra={"event": f"rebalance_{proposal.action}", "computation": computation,
                   "interval": index, "from": proposal.from_node, "to": proposal.to_node},
        )  # fmt: skip
