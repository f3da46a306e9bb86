"""A node's link to the injector's ``Control`` service: leases in, fencing out.

:func:`register_intervals` asks for the node's intervals and returns the
epoch of each (retrying until the injector answers). :class:`LeaseKeeper`
polls the assignment: it confirms the node's leases (acks wait for a fresh
confirmation), follows where other intervals are served, and calls
``on_superseded`` when one of the node's intervals is leased at a newer
epoch: that node must stop writing. An interval leased to another node at an
epoch that is not newer than the node's own is a conflict the registry cannot
have made unless it lost its history (every record of its grants):
``on_conflict``, and the node stops writing too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

import grpc

from millrace.computations import IntervalId
from millrace.deployment.security import Security
from millrace.wire.v1 import control_pb2, control_pb2_grpc

log = logging.getLogger(__name__)


def register_intervals(
    address: str,
    *,
    node_id: str,
    computation: str,
    node_address: str,
    intervals: list[int],
    stored_epochs: Mapping[int, int] | None = None,
    security: Security = Security(),
) -> dict[int, int]:
    """Lease ``intervals`` from the injector at ``address``; interval -> epoch.

    ``stored_epochs``: the epoch each interval's store already claimed; the
    registry grants epochs above them.
    """
    channel = security.open_channel(address)
    stub = control_pb2_grpc.ControlStub(channel)
    request = control_pb2.RegisterNodeRequest(
        node_id=node_id,
        computation=computation,
        address=node_address,
        interval_indexes=intervals,
        stored_epochs=[
            control_pb2.StoredEpoch(index=index, epoch=epoch)
            for index, epoch in (stored_epochs or {}).items()
        ],
    )
    backoff, warned = 0.1, False
    try:
        while True:
            try:
                response = stub.RegisterNode(request, timeout=5, wait_for_ready=True)
                return {lease.interval.index: lease.epoch for lease in response.leases}
            except grpc.RpcError as error:
                if error.code() in (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    grpc.StatusCode.UNAUTHENTICATED,
                ):
                    raise ValueError(
                        f"the injector refused the registration: {error.details()}"
                    ) from error
                if not warned:
                    log.warning(
                        "waiting for the injector at %s to lease intervals: %s",
                        address,
                        error.code(),
                    )
                    warned = True
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
    finally:
        channel.close()


class LeaseKeeper:
    """Keeps a node's leases confirmed, its routes current, and fences what it lost.

    Every ``poll_s`` (and at once after :meth:`check_now`) it asks the
    registry for the whole assignment:

    - one of its intervals leased at a newer epoch: ``on_superseded``;
    - one of its intervals leased to another address (``own_address``) at an epoch
      not above its own: ``on_conflict`` (two owners at once: the registry lost
      what it granted);
    - every lease's address: ``on_routes`` (senders follow replacements);
    - the whole assignment (its moves): ``on_assignment``;
    - every lease's epoch: :meth:`granted_epoch`, what senders' epochs are
      checked against (an epoch the registry never granted is not believed);
    - its own leases still current: the lease is *confirmed*.

    :meth:`fresh` is what acks wait on. A lease is fresh when confirmed within
    ``lease_s`` and the process has run without a gap since: a node that was
    paused (SIGSTOP, a frozen VM, a long stall) may have been replaced
    meanwhile, so after a gap it acks nothing until the registry confirms it
    again, and a node that cannot reach the registry stops acking after
    ``lease_s``.
    """

    def __init__(
        self,
        address: str,
        *,
        held: Callable[[], Mapping[IntervalId, int]],
        on_superseded: Callable[[str, int, int, str], None],
        on_routes: Callable[[list[tuple[str, int, str]]], None],
        own_address: str = "",
        on_conflict: Callable[[str, int, int, str], None] | None = None,
        on_assignment: Callable[[control_pb2.Assignment], None] | None = None,
        security: Security = Security(),
        poll_s: float = 0.25,
        lease_s: float = 5.0,
        gap_s: float = 0.5,
    ) -> None:
        self._address = address
        self._held = held
        self._on_superseded = on_superseded
        self._on_routes = on_routes
        self._own_address = own_address
        self._on_conflict = on_conflict
        self._on_assignment = on_assignment
        self._poll_s = poll_s
        self._lease_s = lease_s
        self._gap_s = gap_s
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self._confirmed_at: dict[IntervalId, float] = {}
        """Per held interval: when the registry last confirmed its lease (monotonic)."""
        self._last_tick = time.monotonic()
        self._granted: dict[IntervalId, int] = {}
        self._wake = threading.Event()
        self._channel = security.open_channel(address)
        self._threads = [
            threading.Thread(target=self._poll, name="lease-poll", daemon=True),
            threading.Thread(target=self._tick, name="lease-tick", daemon=True),
        ]

    def start(self) -> None:
        """Start confirming."""
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop confirming (and release every :meth:`wait_fresh`)."""
        self._stopping.set()
        self._wake.set()
        with self._cond:
            self._cond.notify_all()
        self._channel.close()

    def check_now(self) -> None:
        """Ask the registry now rather than at the next poll (something looks off)."""
        self._wake.set()

    def granted_epoch(self, computation: str, index: int) -> int | None:
        """The epoch of the interval's current lease as last seen (None: no lease seen)."""
        with self._cond:
            return self._granted.get(IntervalId(computation, index))

    def fresh(self, interval: IntervalId) -> bool:
        """True while ``(computation, index)``'s lease was confirmed recently and the process
        never stalled since."""
        with self._cond:
            return self._fresh_locked(interval, time.monotonic())

    def _fresh_locked(self, interval: IntervalId, now: float) -> bool:
        confirmed = self._confirmed_at.get(interval, 0.0)
        return now - confirmed < self._lease_s and now - self._last_tick < self._gap_s

    def wait_fresh(self, interval: IntervalId, timeout: float) -> bool:
        """Block until :meth:`fresh` (True), or ``timeout`` or :meth:`stop` (False)."""
        if self.fresh(interval):
            return True
        self._wake.set()  # confirm now rather than at the next poll
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._stopping.is_set():
                now = time.monotonic()
                if self._fresh_locked(interval, now):
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(0.05, deadline - now))
        return False

    def _tick(self) -> None:
        """Notice the process stalling: then the lease needs confirming again."""
        while not self._stopping.wait(0.05):
            now = time.monotonic()
            with self._cond:
                stalled = now - self._last_tick >= self._gap_s
                if stalled:
                    self._confirmed_at.clear()
                self._last_tick = now
            if stalled:
                self._wake.set()

    def _poll(self) -> None:
        stub = control_pb2_grpc.ControlStub(self._channel)
        request = control_pb2.GetAssignmentRequest()
        while not self._stopping.is_set():
            asked = time.monotonic()
            try:
                assignment = stub.GetAssignment(request, timeout=2.0)
            except grpc.RpcError as error:
                if self._stopping.is_set():
                    return
                log.debug("lease confirmation from %s failed: %s", self._address, error.code())
            else:
                self._apply(assignment, asked)
            self._wake.wait(self._poll_s)
            self._wake.clear()

    def _apply(self, assignment: control_pb2.Assignment, asked: float) -> None:
        held = self._held()
        routes: list[tuple[str, int, str]] = []
        current = set(held)  # an interval the registry does not list has no rival owner
        for lease in assignment.leases:
            key = IntervalId(lease.interval.computation, lease.interval.index)
            routes.append((*key, lease.address))
            own = held.get(key)
            if own is None:
                continue
            elsewhere = bool(self._own_address) and lease.address != self._own_address
            if lease.epoch > own:
                current.discard(key)
                self._on_superseded(*key, lease.epoch, lease.node_id)
            elif elsewhere:
                current.discard(key)
                if self._on_conflict is not None:
                    self._on_conflict(*key, lease.epoch, f"{lease.node_id} at {lease.address}")
            elif lease.epoch != own:
                current.discard(key)
        self._on_routes(routes)
        if self._on_assignment is not None:
            self._on_assignment(assignment)
        with self._cond:
            for lease in assignment.leases:
                key = IntervalId(lease.interval.computation, lease.interval.index)
                self._granted[key] = max(self._granted.get(key, 0), lease.epoch)
            # Confirmed as of when it was asked; a stall since then voids it.
            valid = asked >= self._last_tick - self._gap_s
            for key in held:
                if key in current and valid:
                    self._confirmed_at[key] = max(self._confirmed_at.get(key, 0.0), asked)
                elif key not in current:
                    self._confirmed_at.pop(key, None)
            self._cond.notify_all()
