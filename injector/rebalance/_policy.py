"""The rebalancer's decisions, as pure functions of a computation's layout and loads.

A node's load is the sum of its intervals' records/s. At most one move at a time:

- a live node with no interval takes one from the node with the most (so a node
  started with no placement gets work even before there is load);
- otherwise, when the busiest node (of those with two intervals or more) carries more
  than ``imbalance_percent`` above the least busy one, and at least
  ``min_records_per_s``, the interval whose move narrows the gap the most moves; a
  move that would narrow it by less than a fifth is not worth its pause.

Hysteresis comes from the threshold, from the smallest narrowing and from the
caller's cool-down and rate limit (:class:`Rebalancer`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

MIN_NARROWING = 0.2
"""A load move must narrow the gap between the two nodes by at least this share."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """Move ``index`` from ``from_node`` to ``to_node``, for ``reason``."""

    index: int
    from_node: str
    to_node: str
    reason: str


def plan_move(
    owners: Mapping[int, str],
    rates: Mapping[int, float],
    nodes: Collection[str],
    *,
    movable: Collection[int],
    imbalance_percent: int,
    min_records_per_s: float,
) -> Proposal | None:
    """The one move that balances ``nodes`` (live, not drained) best, or None.

    ``owners``: interval -> the node it runs on (or moves to); ``movable``: the
    intervals that may move now (not cooling down)."""
    if len(nodes) < 2:
        return None
    held: dict[str, list[int]] = {node: [] for node in sorted(nodes)}
    for index, node in owners.items():
        if node in held:
            held[node].append(index)
    load = {node: sum(rates.get(i, 0.0) for i in indexes) for node, indexes in held.items()}
    empty = [node for node, indexes in held.items() if not indexes]
    fullest = max(held, key=lambda node: (len(held[node]), load[node]))
    if empty and len(held[fullest]) >= 2:
        candidates = [i for i in held[fullest] if i in movable]
        if candidates:
            index = min(candidates, key=lambda i: (rates.get(i, 0.0), i))
            return Proposal(index, fullest, empty[0], f"rebalance: {empty[0]} has no interval")
    busiest = max(
        (node for node, indexes in held.items() if len(indexes) >= 2),
        key=lambda node: load[node],
        default=None,
    )
    idlest = min(held, key=lambda node: load[node])
    if busiest is None or busiest == idlest or load[busiest] < min_records_per_s:
        return None
    if load[busiest] <= load[idlest] * (1 + imbalance_percent / 100):
        return None
    gap = load[busiest] - load[idlest]
    best: tuple[float, int] | None = None
    for index in held[busiest]:
        rate = rates.get(index, 0.0)
        if (
            index not in movable
            or not MIN_NARROWING / 2 * gap <= rate <= (1 - MIN_NARROWING / 2) * gap
        ):
            continue
        left = abs(gap - 2 * rate)
        if best is None or (left, index) < best:
            best = (left, index)
    if best is None:
        return None
    index = best[1]
    reason = (
        f"rebalance: {busiest} {load[busiest]:.0f} rec/s, {idlest} {load[idlest]:.0f} rec/s, "
        f"interval {index} {rates.get(index, 0.0):.0f} rec/s"
    )
    return Proposal(index, busiest, idlest, reason)


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
