"""Where each interval of a computation runs, from the registry and the deployment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from millrace.deployment import NodePlacement
from millrace.injector.ownership import OwnershipRegistry
from millrace.injector.rebalance._loads import LoadTable


@dataclass(frozen=True, slots=True)
class IntervalPlace:
    """One interval: the node it runs on or goes to, and whether a move is under way."""

    owner: str
    """The node it moved to, else its lease's node, else its deployment placement."""
    holder: str
    """The node holding its lease ("" if never leased)."""
    epoch: int

    @property
    def moving(self) -> bool:
        """True while a recorded move waits for the new node to register it."""
        return bool(self.holder) and self.holder != self.owner


def takers(registry: OwnershipRegistry, loads: LoadTable, computation: str) -> set[str]:
    """The nodes that may take intervals of ``computation``: live (the injector checks
    every report against the deployment) and not drained."""
    return loads.live_nodes(computation) - registry.draining()


def interval_places(
    registry: OwnershipRegistry,
    nodes: Mapping[str, NodePlacement],
    computation: str,
) -> dict[int, IntervalPlace]:
    """Every interval ``computation`` has now (split ones replaced by their halves),
    where the registry or the deployment places it."""
    current = set(registry.layout(computation).ids())
    placed = {
        index: name
        for name, node in nodes.items()
        if node.computation == computation
        for index in node.intervals
    }
    _, leases = registry.leases([computation])
    held = {lease.index: lease for lease in leases}
    moved = {index: node for (_, index), node in registry.moves([computation]).items()}
    places: dict[int, IntervalPlace] = {}
    for index in sorted((set(placed) | set(held) | set(moved)) & current):
        lease = held.get(index)
        holder = "" if lease is None else lease.node_id
        owner = moved.get(index) or holder or placed.get(index, "")
        places[index] = IntervalPlace(owner, holder, 0 if lease is None else lease.epoch)
    return places
