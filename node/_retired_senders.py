"""``FloorNotices``: a node telling receivers the floors of senders its intervals retired.

An interval made by a split (the lower half) or a merge answers for the names it
retired (``engine/_retired_senders.py``). Once nothing it inherited awaits an ack,
its worker offers their floors here; one thread tells every interval of every
consumer of the computation's outputs (and their sinks), as the layouts are now, and
when all of them committed it, the worker forgets the names. A receiver that did not
(down, moving) is told again at the worker's next offer: telling twice is harmless
(floors only rise). A name that is an interval of the layout again (merged back) is
forgotten untold: it sends, and reports its floors, itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

import grpc

from millrace.computations import Layout, Topology
from millrace.delivery import Origin, tell_floor
from millrace.engine import Retired, routes_of

log = logging.getLogger(__name__)

TELL_TIMEOUT_S = 10.0


class FloorNotices:
    """Thread-safe :meth:`offer`; the telling happens on a thread of its own per offer
    (at most one per interval at a time)."""

    def __init__(
        self,
        *,
        sender_id: str,
        topology: Topology,
        layouts: Callable[[], Mapping[str, Layout]],
        address_of: Callable[[str, int], str],
        channel_factory: Callable[[str], grpc.Channel],
    ) -> None:
        self._sender_id = sender_id
        self._topology = topology
        self._layouts = layouts
        self._address_of = address_of
        self._channel_factory = channel_factory
        self._lock = threading.Lock()
        self._telling: set[tuple[str, int]] = set()
        self.told = 0
        """Notices receivers committed (for tests and logs)."""

    def offer(
        self,
        computation: str,
        interval: int,
        floors: Mapping[int, Retired],
        forget: Callable[[Mapping[int, Retired]], None],
    ) -> None:
        """Tell every receiver ``floors`` (retired interval id -> floor and epoch) that
        ``computation``'s ``interval`` answers for; then ``forget(floors)`` (on the
        telling thread). Nothing if that interval's last offer is still being told."""
        with self._lock:
            if (computation, interval) in self._telling:
                return
            self._telling.add((computation, interval))
        threading.Thread(
            target=self._tell,
            args=(computation, interval, dict(floors), forget),
            name=f"floors-{computation}-{interval}",
            daemon=True,
        ).start()

    def _tell(
        self,
        computation: str,
        interval: int,
        floors: dict[int, Retired],
        forget: Callable[[Mapping[int, Retired]], None],
    ) -> None:
        try:
            layouts = self._layouts()
            layout = layouts.get(computation)
            count = self._topology.computations[computation].intervals
            live = set(layout.ids()) if layout is not None else set(range(count))
            receivers = self.receivers(computation, layouts)
            told = {
                index: retired
                for index, retired in floors.items()
                if index in live or self._tell_all(computation, index, retired, receivers)
            }
            if told:
                log.info(
                    "%s/%s: receivers took the floors of retired senders %s",
                    computation, interval, sorted(told),
                    extra={"event": "retired_senders_told", "computation": computation,
                           "interval": interval},
                )  # fmt: skip
                forget(told)
        except Exception:
            log.exception("telling the floors of %s/%s's retired senders", computation, interval)
        finally:
            with self._lock:
                self._telling.discard((computation, interval))

    def receivers(self, computation: str, layouts: Mapping[str, Layout]) -> list[tuple[str, int]]:
        """Every (consumer, interval id) the outputs of ``computation`` go to now."""
        spec = self._topology.computations[computation]
        return sorted(
            {
                (route.consumer, index)
                for stream in spec.outputs
                for route in routes_of(self._topology, stream, layouts)
                for index in route.ids
            }
        )

    def _tell_all(
        self, computation: str, index: int, retired: Retired, receivers: list[tuple[str, int]]
    ) -> bool:
        origin = Origin(computation, index, retired.epoch)
        for consumer, target in receivers:
            address = self._address_of(consumer, target)
            channel = self._channel_factory(address)
            try:
                if not tell_floor(
                    channel, sender_id=self._sender_id, origin=origin, consumer=consumer,
                    interval=target, floor=retired.floor, timeout_s=TELL_TIMEOUT_S,
                ):  # fmt: skip
                    return False
            finally:
                channel.close()
            with self._lock:
                self.told += 1
        return True
