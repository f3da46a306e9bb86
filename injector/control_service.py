"""The ``Control`` gRPC service: interval leases and epochs, served by the injector."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import grpc

from millrace.deployment import abort, brief
from millrace.injector.ownership import Lease, OwnershipRegistry
from millrace.wire.v1 import control_pb2, control_pb2_grpc, record_pb2


def _to_proto(lease: Lease) -> control_pb2.IntervalLease:
    return control_pb2.IntervalLease(
        interval=record_pb2.KeyInterval(
            computation=lease.computation, index=lease.index, count=lease.count
        ),
        epoch=lease.epoch,
        node_id=lease.node_id,
        address=lease.address,
    )


def _moves_to_proto(
    registry: OwnershipRegistry, computations: list[str]
) -> list[control_pb2.IntervalMove]:
    counts = registry.interval_counts()
    return [
        control_pb2.IntervalMove(
            interval=record_pb2.KeyInterval(
                computation=computation, index=index, count=counts[computation]
            ),
            to_node_id=node_id,
        )
        for (computation, index), node_id in sorted(registry.moves(computations).items())
    ]


class ControlService(control_pb2_grpc.ControlServicer):
    """RegisterNode hands out fresh epochs; GetAssignment/WatchAssignment show the leases
    and the moves; MoveInterval records a move."""

    def __init__(
        self, registry: OwnershipRegistry, node_computations: Mapping[str, str] | None = None
    ) -> None:
        """``node_computations``: each node of the deployment -> its computation."""
        self._registry = registry
        self._node_computations = dict(node_computations or {})

    def RegisterNode(
        self, request: control_pb2.RegisterNodeRequest, context: grpc.ServicerContext
    ) -> control_pb2.RegisterNodeResponse:
        try:
            leases = self._registry.register(
                request.node_id,
                request.computation,
                request.address,
                request.interval_indexes,
                {stored.index: stored.epoch for stored in request.stored_epochs},
            )
        except ValueError as exc:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        except OSError as exc:  # the journal cannot be written (a full disk): nothing granted
            abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"the ownership journal cannot be written: {exc}",
            )
            raise
        moved_away = self._registry.moved_away(
            request.node_id, request.computation, request.interval_indexes
        )
        return control_pb2.RegisterNodeResponse(
            leases=[_to_proto(lease) for lease in leases], moved_away=moved_away
        )

    def MoveInterval(
        self, request: control_pb2.MoveIntervalRequest, context: grpc.ServicerContext
    ) -> control_pb2.MoveIntervalResponse:
        interval, to = request.interval, request.to_node_id
        placed = self._node_computations.get(to)
        if placed is None:
            abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, f"no node {brief(to)} in the deployment"
            )
        if placed != interval.computation:
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"node {to} runs {placed}, not {brief(interval.computation)}",
            )
        count = self._registry.interval_counts().get(interval.computation)
        if interval.count != count:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{interval.computation} has {count} intervals, not {interval.count}",
            )
        try:
            current = self._registry.move(interval.computation, interval.index, to)
        except ValueError as exc:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise
        except OSError as exc:
            abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"the ownership journal cannot be written: {exc}",
            )
            raise
        return control_pb2.MoveIntervalResponse(
            move=control_pb2.IntervalMove(interval=interval, to_node_id=to),
            current=None if current is None else _to_proto(current),
        )

    def GetAssignment(
        self, request: control_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> control_pb2.Assignment:
        version, leases = self._registry.leases(request.computations)
        return control_pb2.Assignment(
            leases=[_to_proto(lease) for lease in leases],
            version=version,
            moves=_moves_to_proto(self._registry, list(request.computations)),
        )

    def WatchAssignment(
        self, request: control_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> Iterator[control_pb2.Assignment]:
        version = -1
        while context.is_active():
            current, leases = self._registry.leases(request.computations)
            if current != version:
                version = current
                yield control_pb2.Assignment(
                    leases=[_to_proto(lease) for lease in leases],
                    version=version,
                    moves=_moves_to_proto(self._registry, list(request.computations)),
                )
            self._registry.wait_for_change(version, 0.2)
