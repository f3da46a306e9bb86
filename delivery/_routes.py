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

from millrace.deployment import Deployment


class Routes:
    """Thread-safe: the assignment watch updates, senders resolve."""

    def __init__(self, deployment: Deployment) -> None:
        self._deployment = deployment
        self._leased: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def address_of(self, consumer: str, interval: int) -> str:
        """The address of ``consumer``'s ``interval``: its current lease's, else its placement's."""
        with self._lock:
            leased = self._leased.get((consumer, interval))
        return leased if leased else self._deployment.address_of(consumer, interval)

    def update(self, leases: Iterable[tuple[str, int, str]]) -> bool:
        """Take ``(computation, interval, address)`` of current leases; True if a route moved."""
        changed = False
        with self._lock:
            for computation, interval, address in leases:
                if address and self._leased.get((computation, interval)) != address:
                    self._leased[(computation, interval)] = address
                    changed = True
        return changed
