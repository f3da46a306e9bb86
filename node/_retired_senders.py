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

from millrace.computations import IntervalId, Layout, Topology
from millrace.delivery import Origin, tell_floor
from millrace.engine import routes_of

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
        self._telling: set[IntervalId] = set()
        self.told = 0
        """Notices receivers committed (for tests and logs)."""

    def offer(
        self, origin: Origin, floors: Mapping[int, int], forget: Callable[[Mapping[int, int]], None]
    ) -> None:
        """Tell every receiver ``floors`` (retired interval id -> floor) that the interval
        of ``origin`` answers for, as ``origin``; then ``forget(floors)`` (on the telling
        thread). Nothing if that interval's last offer is still being told."""
        key = IntervalId(origin.computation, origin.interval)
        with self._lock:
            if key in self._telling:
                return
            self._telling.add(key)
        threading.Thread(
            target=self._tell,
            args=(origin, dict(floors), forget),
            name=f"floors-{origin.computation}-{origin.interval}",
            daemon=True,
        ).start()

    def _tell(
        self, origin: Origin, floors: dict[int, int], forget: Callable[[Mapping[int, int]], None]
    ) -> None:
        computation = origin.computation
        try:
            layouts = self._layouts()
            layout = layouts.get(computation)
            count = self._topology.computations[computation].intervals
            live = set(layout.ids()) if layout is not None else set(range(count))
            receivers = self.receivers(computation, layouts)
            told = {
                index: floor
                for index, floor in floors.items()
                if index in live or self._tell_all(origin, index, floor, receivers)
            }
            if told:
                log.info(
                    "%s/%s: receivers took the floors of retired senders %s",
                    computation, origin.interval, sorted(told),
                    extra={"event": "retired_senders_told", "computation": computation,
                           "interval": origin.interval},
                )  # fmt: skip
                forget(told)
        except Exception:
            log.exception(
                "telling the floors of %s/%s's retired senders", computation, origin.interval
            )
        finally:
            with self._lock:
                self._telling.discard(IntervalId(computation, origin.interval))

    def receivers(self, computation: str, layouts: Mapping[str, Layout]) -> list[IntervalId]:
        """Every (consumer, interval id) the outputs of ``computation`` go to now."""
        spec = self._topology.computations[computation]
        return sorted(
            {
                IntervalId(route.consumer, index)
                for stream in spec.outputs
                for route in routes_of(self._topology, stream, layouts)
                for index in route.ids
            }
        )

    def _tell_all(
        self, origin: Origin, retired: int, floor: int, receivers: list[IntervalId]
    ) -> bool:
        for consumer, target in receivers:
            address = self._address_of(consumer, target)
            channel = self._channel_factory(address)
            try:
                if not tell_floor(
                    channel, sender_id=self._sender_id, origin=origin, retired=retired,
                    consumer=consumer, interval=target, floor=floor, timeout_s=TELL_TIMEOUT_S,
                ):  # fmt: skip
                    log.debug(
                        "%s/%s: %s/%s at %s did not take retired %s's floor %s yet",
                        origin.computation, origin.interval, consumer, target, address,
                        retired, floor,
                    )  # fmt: skip
                    return False
            finally:
                channel.close()
            with self._lock:
                self.told += 1
        return True
