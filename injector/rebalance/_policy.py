"""The rebalancer's decisions, as pure functions of a computation's layout and loads.

A node's load is the sum of its intervals' costs: the CPU each interval's worker thread
uses (what it demands; records/s only show what a saturated node manages, and would
make the node that keeps up look the busier). At most one move at a time:

- a live node with no interval takes one from the node with the most (so a node
  started with no placement gets work even before there is load);
- otherwise, when the busiest node (of those with two intervals or more) carries more
  than ``imbalance_percent`` above the least busy one and commits at least
  ``min_records_per_s``, the interval whose move narrows the gap the most moves; a
  move that would narrow it by less than a fifth is not worth its pause;
- when no move would narrow such a gap because the busiest node's heaviest interval
  is too heavy to move (a node with one hot interval, while another idles), that
  interval splits in two (its halves then move like any other interval);
- when nothing needs balancing (:func:`plan_merge`), two cold neighbours -- the halves
  of one split interval, together under a quarter of ``min_records_per_s`` -- merge
  where they both run, or the colder half moves to its other half's node first (when
  its own node keeps another interval: a node is never emptied to merge).

Hysteresis comes from the threshold, from the smallest narrowing, from the gap
between what splits (a node at ``min_records_per_s`` or more) and what merges (a pair
at a quarter of it), and from the caller's cool-down and rate limit
(:class:`Rebalancer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from millrace.computations import Layout

MIN_NARROWING = 0.2
"""A load move must narrow the gap between the two nodes by at least this share."""
COLD_SHARE = 0.25
"""Two halves merge when together they commit under this share of ``min_records_per_s``."""

Action = Literal["move", "split", "merge"]


@dataclass(frozen=True, slots=True)
class Proposal:
    """Move ``index`` from ``from_node`` to ``to_node``, for ``reason``; or split it in
    two, or merge it with its other half, where it is (``to_node`` is then
    ``from_node``)."""

    index: int
    from_node: str
    to_node: str
    reason: str
    by_load: bool = True
    """A change for load (the caller waits for a second look to agree); False: a node
    with no interval takes one (nothing to wait for)."""
    action: Action = "move"

    @property
    def split(self) -> bool:
        """True for a split."""
        return self.action == "split"


def plan_move(
    owners: Mapping[int, str],
    cost: Mapping[int, float],
    nodes: Collection[str],
    *,
    rates: Mapping[int, float] | None = None,
    movable: Collection[int],
    imbalance_percent: int,
    min_records_per_s: float,
    splittable: Collection[int] = (),
) -> Proposal | None:
    """The one move that balances ``nodes`` (live, not drained) best, or None.

    ``owners``: interval -> the node it runs on (or moves to); ``cost``: what each
    interval weighs (the CPU its worker uses: what it demands, where records/s only
    show what a saturated node manages); ``rates``: its records/s (default ``cost``),
    which the busiest node must reach for a move to be worth it; ``movable``: the
    intervals that may move now (not cooling down); ``splittable``: those that may
    split (not cooling down, not too small yet)."""
    rates = cost if rates is None else rates
    if len(nodes) < 2:
        return None
    held: dict[str, list[int]] = {node: [] for node in sorted(nodes)}
    for index, node in owners.items():
        if node in held:
            held[node].append(index)
    load = {node: sum(cost.get(i, 0.0) for i in indexes) for node, indexes in held.items()}
    empty = [node for node, indexes in held.items() if not indexes]
    fullest = max(held, key=lambda node: (len(held[node]), load[node]))
    if empty and len(held[fullest]) >= 2:
        candidates = [i for i in held[fullest] if i in movable]
        if candidates:
            index = min(candidates, key=lambda i: (cost.get(i, 0.0), i))
            reason = f"rebalance: {empty[0]} has no interval"
            return Proposal(index, fullest, empty[0], reason, by_load=False)
    busiest = max(
        (node for node, indexes in held.items() if indexes),
        key=lambda node: load[node],
        default=None,
    )
    idlest = min(held, key=lambda node: load[node])
    if busiest is None or busiest == idlest:
        return None
    if sum(rates.get(i, 0.0) for i in held[busiest]) < min_records_per_s:
        return None
    if load[busiest] <= load[idlest] * (1 + imbalance_percent / 100):
        return None
    gap = load[busiest] - load[idlest]
    lowest, highest = MIN_NARROWING / 2 * gap, (1 - MIN_NARROWING / 2) * gap
    best: tuple[float, int] | None = None
    for index in held[busiest] if len(held[busiest]) >= 2 else ():
        weight = cost.get(index, 0.0)
        if index in movable and lowest <= weight <= highest:
            left = abs(gap - 2 * weight)
            if best is None or (left, index) < best:
                best = (left, index)
    if best is None:
        heaviest = max(held[busiest], key=lambda i: (cost.get(i, 0.0), -i))
        if heaviest not in splittable or cost.get(heaviest, 0.0) <= highest:
            return None
        reason = (
            f"rebalance: {busiest} {load[busiest]:.2f} cpu, {idlest} {load[idlest]:.2f} cpu, "
            f"interval {heaviest} {cost.get(heaviest, 0.0):.2f} cpu too heavy to move"
        )
        return Proposal(heaviest, busiest, busiest, reason, action="split")
    index = best[1]
    reason = (
        f"rebalance: {busiest} {load[busiest]:.2f} cpu, {idlest} {load[idlest]:.2f} cpu, "
        f"interval {index} {cost.get(index, 0.0):.2f} cpu ({rates.get(index, 0.0):.0f} rec/s)"
    )
    return Proposal(index, busiest, idlest, reason)


def plan_merge(
    layout: Layout,
    owners: Mapping[int, str],
    rates: Mapping[int, float],
    *,
    mergeable: Collection[int],
    min_records_per_s: float,
) -> Proposal | None:
    """Two cold neighbours' merge, or the move that brings them together, or None.

    ``layout``: the computation's intervals now; ``owners``: interval -> the node it
    runs on (the caller passes none that is moving); ``rates``: records/s per interval
    (one with no rate yet is not cold); ``mergeable``: the intervals that may change now
    (not cooling down). Neighbours are the two halves of one split interval; they are
    cold when together they commit under :data:`COLD_SHARE` of ``min_records_per_s``.
    The coldest such pair is chosen."""
    base, ids = layout.base_count, set(layout.ids())
    pairs: list[tuple[float, int, int, int]] = []
    for interval in layout:
        whole, other = interval.whole(base), interval.other_half(base)
        if whole is None or other is None or interval.index % 2:
            continue  # a first interval, or the upper half (its pair is seen from below)
        low, high = interval.id(base), other.id(base)
        pair = {low, high}
        if high not in ids or not pair <= set(mergeable) or not pair <= owners.keys():
            continue
        if not pair <= rates.keys():
            continue
        together = rates[low] + rates[high]
        if together < COLD_SHARE * min_records_per_s:
            pairs.append((together, low, high, whole.id(base)))
    held = Counter(owners.values())
    for together, low, high, whole_id in sorted(pairs):
        cold = f"rebalance: {low} and {high} cold ({together:.0f} rec/s together)"
        if owners[low] == owners[high]:
            reason = f"{cold}, merged into {whole_id}"
            return Proposal(low, owners[low], owners[low], reason, action="merge")
        movers = [i for i in (low, high) if held[owners[i]] >= 2]
        if movers:
            index = min(movers, key=lambda i: (rates[i], i))
            other_id = high if index == low else low
            reason = f"{cold}, {index} joins {other_id} to merge"
            return Proposal(index, owners[index], owners[other_id], reason)
    return None


def plan_drain(
    node: str,
    owners: Mapping[int, str],
    rates: Mapping[int, float],
    targets: Collection[str],
) -> dict[int, str]:
    """Where each interval of ``node`` goes when it is drained: the busiest first, each
    to the target with the fewest intervals (then the least load, then by name)."""
    if not targets:
        return {}
    count = {target: 0 for target in targets}
    load = {target: 0.0 for target in targets}
    for index, owner in owners.items():
        if owner in count:
            count[owner] += 1
            load[owner] += rates.get(index, 0.0)
    plan: dict[int, str] = {}
    leaving = [i for i, owner in owners.items() if owner == node]
    for index in sorted(leaving, key=lambda i: (-rates.get(i, 0.0), i)):
        target = min(count, key=lambda t: (count[t], load[t], t))
        plan[index] = target
        count[target] += 1
        load[target] += rates.get(index, 0.0)
    return plan
