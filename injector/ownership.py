"""``OwnershipRegistry``: which node owns which key interval, under which epoch.

A node registers the intervals it is placed on; each registration of an
interval hands out the next epoch for it (epochs are never reused: the
registry is journaled, temp file + fsync + rename, before it answers). A
newer epoch fences every older owner: receivers refuse its deliveries, its
store refuses its commits, and a node that sees its interval leased at a
newer epoch in ``WatchAssignment`` fences itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from computations import Topology
from millrace._service_support import write_json_atomically


@dataclass(frozen=True, slots=True)
class Lease:
    """One interval's current owner."""

    computation: str
    index: int
    count: int
    epoch: int
    node_id: str
    address: str


class OwnershipRegistry:
    """Thread-safe leases with a durable journal."""

    def __init__(self, topology: Topology, journal_path: Path) -> None:
        self._topology = topology
        self._path = journal_path
        self._cond = threading.Condition()
        self._leases: dict[tuple[str, int], Lease] = {}
        self.version = 0
        if journal_path.exists():
            body = json.loads(journal_path.read_text())
            for raw in body["leases"]:
                lease = Lease(**raw)
                self._leases[(lease.computation, lease.index)] = lease
            self.version = int(body["version"])

    def register(
        self, node_id: str, computation: str, address: str, indexes: Iterable[int]
    ) -> list[Lease]:
        """Lease ``indexes`` of ``computation`` to ``node_id`` at fresh epochs (durably)."""
        spec = self._topology.computations.get(computation)
        if spec is None:
            raise ValueError(f"unknown computation {computation!r}")
        granted: list[Lease] = []
        with self._cond:
            for index in indexes:
                if not 0 <= index < spec.intervals:
                    raise ValueError(f"{computation!r} has no interval {index}")
                previous = self._leases.get((computation, index))
                epoch = 1 if previous is None else previous.epoch + 1
                lease = Lease(computation, index, spec.intervals, epoch, node_id, address)
                self._leases[(computation, index)] = lease
                granted.append(lease)
            self.version += 1
            self._save()
            self._cond.notify_all()
        return granted

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
            lease = self._leases.get((computation, index))
            return 0 if lease is None else lease.epoch

    def wait_for_change(self, version: int, timeout: float) -> int:
        """Block until the version differs from ``version`` (or timeout); the version."""
        with self._cond:
            self._cond.wait_for(lambda: self.version != version, timeout)
            return self.version

    def _save(self) -> None:
        body = {
            "version": self.version,
            "leases": [_as_dict(lease) for lease in self._leases.values()],
        }
        write_json_atomically(self._path, body)


def _as_dict(lease: Lease) -> dict[str, object]:
    return {
        "computation": lease.computation,
        "index": lease.index,
        "count": lease.count,
        "epoch": lease.epoch,
        "node_id": lease.node_id,
        "address": lease.address,
    }
