"""A node's link to the injector's ``Control`` service: leases in, fencing out.

:func:`register_intervals` asks for the node's intervals and returns the
epoch of each (retrying until the injector answers). :class:`AssignmentWatch`
follows ``WatchAssignment`` and calls ``on_superseded`` when one of the
node's intervals is leased at a newer epoch: that node must stop writing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

import grpc

from computations._sender import STREAM_DEADLINE_S
from millrace.security import Security
from millrace.wire.v1 import control_pb2, control_pb2_grpc

log = logging.getLogger(__name__)


def register_intervals(
    address: str,
    *,
    node_id: str,
    computation: str,
    node_address: str,
    intervals: list[int],
    security: Security = Security(),
) -> dict[int, int]:
    """Lease ``intervals`` from the injector at ``address``; interval -> epoch."""
    channel = security.open_channel(address)
    stub = control_pb2_grpc.ControlStub(channel)
    request = control_pb2.RegisterNodeRequest(
        node_id=node_id, computation=computation, address=node_address, interval_indexes=intervals
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


class AssignmentWatch:
    """Calls ``on_superseded(interval, epoch, owner)`` when a held interval moves on."""

    def __init__(
        self,
        address: str,
        *,
        computation: str,
        held: Callable[[], Mapping[int, int]],
        on_superseded: Callable[[int, int, str], None],
        security: Security = Security(),
    ) -> None:
        self._address = address
        self._computation = computation
        self._held = held
        self._on_superseded = on_superseded
        self._stopping = threading.Event()
        self._channel = security.open_channel(address)
        self._thread = threading.Thread(target=self._run, name="assignment-watch", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching."""
        self._stopping.set()
        self._channel.close()

    def _run(self) -> None:
        stub = control_pb2_grpc.ControlStub(self._channel)
        request = control_pb2.GetAssignmentRequest(computations=[self._computation])
        while not self._stopping.is_set():
            try:
                for assignment in stub.WatchAssignment(request, timeout=STREAM_DEADLINE_S):
                    held = self._held()
                    for lease in assignment.leases:
                        own = held.get(lease.interval.index)
                        if own is not None and lease.epoch > own:
                            self._on_superseded(lease.interval.index, lease.epoch, lease.node_id)
            except grpc.RpcError:
                if self._stopping.is_set():
                    return
            self._stopping.wait(0.5)
