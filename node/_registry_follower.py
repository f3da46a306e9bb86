"""``RegistryFollower``: a node following the injector's ownership registry.

Once the node's intervals are leased, :meth:`RegistryFollower.connect` builds
the ``LeaseKeeper`` (leases confirmed, routes and assignments polled) and the
``IntervalMoves`` (intervals moved here taken over, those moved away handed
over). What the keeper hears lands here: new routes refresh the senders; a
lease superseded, or leased elsewhere in conflict, fences its worker; an
assignment re-routes by the new layouts, starts the moves to this node and
notices a complete drain. Receivers refusing an interval as stale for long
while the registry still leases it here are said as a lease conflict too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from millrace.computations import IntervalId
from millrace.delivery import Origin, Routes, SenderPool
from millrace.deployment.security import Security
from millrace.engine import Frame
from millrace.node._control_link import LeaseKeeper
from millrace.node._hosted_intervals import HostedIntervals
from millrace.node._interval_moves import IntervalMoves, is_drained
from millrace.node._interval_splits import SplitLayouts
from millrace.node._metrics import NodeMetrics
from millrace.node._stale_refusals import StaleRefusals
from millrace.statestore import StoreConfig
from millrace.wire.v1 import control_pb2

log = logging.getLogger(__name__)


class RegistryFollower:
    """Acts on what the registry tells a node. ``keeper`` and ``moves`` are None
    without an injector, and until :meth:`connect`."""

    def __init__(
        self,
        *,
        node_id: str,
        computation: str,
        injector: str | None,
        registry: grpc.Channel | None,
        data_dir: Path,
        store_config: StoreConfig,
        security: Security,
        hosted: HostedIntervals,
        splits: SplitLayouts,
        routes: Routes,
        senders: SenderPool,
        route: Callable[[Origin, list[Frame]], None],
        metrics: NodeMetrics,
        drained: threading.Event,
    ) -> None:
        """``injector``: its address (None without one); ``registry`` a channel to it;
        ``route(origin, frames)`` hands frames to the senders; ``drained`` is set once
        the registry drained the node and nothing runs here."""
        self._node_id = node_id
        self._computation = computation
        self._injector = injector
        self._registry = registry
        self._data_dir = data_dir
        self._store_config = store_config
        self._security = security
        self._hosted = hosted
        self._splits = splits
        self._routes = routes
        self._senders = senders
        self._route = route
        self._metrics = metrics
        self._drained = drained
        self._stale = StaleRefusals()
        self.keeper: LeaseKeeper | None = None
        self.moves: IntervalMoves | None = None

    def connect(self, own_address: str) -> None:
        """Build the interval moves and the lease keeper that follow the registry
        (nothing without an injector); neither runs until :meth:`start`."""
        if self._injector is None:
            return
        assert self._registry is not None
        hosted = self._hosted
        self.moves = IntervalMoves(
            node_id=self._node_id,
            computation=self._computation,
            data_dir=self._data_dir,
            store_config=self._store_config,
            registry=self._registry,
            security=self._security,
            host=hosted.take_over,
            release=hosted.release,
            hosted=lambda: {i for _, i in list(hosted.processors)},
            make_store=hosted.make_store,
        )
        self.keeper = LeaseKeeper(
            self._injector,
            held=lambda: {
                IntervalId(p.name, p.interval): p.epoch for p in list(hosted.processors.values())
            },
            on_superseded=self._superseded,
            on_routes=self._follow_routes,
            own_address=own_address,
            on_conflict=self._conflict,
            on_assignment=self._on_assignment,
            security=self._security,
        )

    def start(self, layout: control_pb2.Assignment | None) -> None:
        """Start the lease keeper; follow ``layout``, the assignment read at start."""
        if self.keeper is not None:
            self.keeper.start()
        if self.moves is not None and layout is not None:
            self._on_assignment(layout)

    def refused_as_stale(self, origin: Origin, message: str) -> None:
        """A receiver refused ``origin`` (not fenced) as stale: the registry is asked now
        (the lease keeper fences the worker if it agrees); refusals that go on while it
        still leases the interval here are said as a lease conflict."""
        if self.keeper is not None:
            self.keeper.check_now()
        interval = IntervalId(origin.computation, origin.interval)
        conflict = self._stale.note(interval, origin.epoch, message, time.monotonic())
        if conflict is not None:
            self._say_conflict(conflict, origin.computation, origin.interval, origin.epoch)

    def _say_conflict(
        self, message: str, computation: str, interval: int, epoch: int, **extra: object
    ) -> None:
        """A lease conflict the registry cannot resolve: an error log line and a count."""
        self._metrics.lease_conflicts.labels(computation).inc()
        log.error(
            "%s", message,
            extra={"event": "lease_conflict", "computation": computation, "interval": interval,
                   "epoch": epoch, **extra},
        )  # fmt: skip

    def _follow_routes(self, leases: list[tuple[str, int, str]]) -> None:
        if self._routes.update(leases):
            self._senders.refresh()

    def _superseded(self, computation: str, interval: int, epoch: int, owner: str) -> None:
        worker = self._hosted.workers.get(IntervalId(computation, interval))
        if worker is not None and not worker.fenced:
            worker.fence(epoch, f"interval leased to {owner} at epoch {epoch}")

    def _conflict(self, computation: str, interval: int, epoch: int, owner: str) -> None:
        worker = self._hosted.workers.get(IntervalId(computation, interval))
        if worker is None or worker.fenced:
            return
        own = worker.processor.epoch
        reason = (
            f"lease conflict: {computation}/{interval} is leased to {owner} at epoch {epoch}, "
            f"not above this node's epoch {own}: the injector's registry lost the epochs it "
            "granted (ownership.json, epochs.json and watermarks.json); this node stops "
            "writing the interval and leaves it to that owner"
        )
        self._say_conflict(reason, computation, interval, own, leased_epoch=epoch, leased_to=owner)
        worker.fence(epoch, reason)

    def _on_assignment(self, assignment: control_pb2.Assignment) -> None:
        """Route by the layouts now; take over what moves here; notice that a drain is
        complete."""
        retired = self._splits.follow(assignment)
        if retired is not None:
            for processor in list(self._hosted.processors.values()):
                processor.route_by(self._splits.layouts)
            if retired:  # off the lease keeper's thread: submitting may wait for room
                threading.Thread(
                    target=self._reroute, args=(retired,), name="reroute", daemon=True
                ).start()
        if self.moves is not None:
            self.moves.follow(assignment)
        if (
            not self._drained.is_set()
            and not self._hosted.processors
            and is_drained(assignment, self._node_id, self._computation)
        ):
            log.info(
                "node %s drained: its intervals run elsewhere, nothing pending here",
                self._node_id,
                extra={"event": "drained", "node": self._node_id},
            )  # fmt: skip
            self._drained.set()

    def _reroute(self, retired: list[IntervalId]) -> None:
        """Route again what the senders held for intervals split or merged away."""
        for consumer, interval in retired:
            for origin, frames in self._senders.retire(consumer, interval):
                self._route(origin, frames)
