"""``Routes``: where each destination interval is served right now.

The deployment file says where every interval is placed, but a node may be
replaced at another address: it registers its serving address with the
injector's ownership registry, and that lease wins. Senders follow it
(``SenderPool.refresh``), so a replacement is routed to without restarting
anybody. Sinks do not register: their addresses come from the deployment file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from millrace.computations import IntervalId, KeyInterval
from millrace.deployment import Deployment


class Routes:
    """Thread-safe: the assignment watch updates, senders resolve."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment
        self._leased: dict[IntervalId, str] = {}
        self._lock = threading.Lock()

    def address_of(self, consumer: str, interval: int) -> str:
        """The address of ``consumer``'s ``interval``: its current lease's, else its
        placement's; a half of a split interval not leased yet is where the interval it
        was split from is (its node makes the halves)."""
        spec = self._deployment.topology.computations.get(consumer)
        with self._lock:
            leased = self._leased.get(IntervalId(consumer, interval))
            while not leased and spec is not None and interval >= spec.intervals:
                share = KeyInterval.of_id(consumer, interval, spec.intervals)
                whole = share.whole(spec.intervals)
                assert whole is not None  # an id past the first intervals is a half
                interval = whole.id(spec.intervals)
                leased = self._leased.get(IntervalId(consumer, interval))
        return leased if leased else self._deployment.address_of(consumer, interval)

    def update(self, leases: Iterable[tuple[str, int, str]]) -> bool:
        """Take ``(computation, interval, address)`` of current leases; True if a route moved."""
        changed = False
        with self._lock:
            for computation, interval, address in leases:
                if address and self._leased.get(IntervalId(computation, interval)) != address:
                    self._leased[IntervalId(computation, interval)] = address
                    changed = True
        return changed
