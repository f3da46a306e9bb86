"""The ``Control`` gRPC service: interval leases and epochs, served by the injector."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from millrace.deployment import abort
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


class ControlService(control_pb2_grpc.ControlServicer):
    """RegisterNode hands out fresh epochs; GetAssignment/WatchAssignment show the leases."""

    def __init__(self, registry: OwnershipRegistry) -> None:
        self._registry = registry

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
        return control_pb2.RegisterNodeResponse(leases=[_to_proto(lease) for lease in leases])

    def GetAssignment(
        self, request: control_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> control_pb2.Assignment:
        version, leases = self._registry.leases(request.computations)
        return control_pb2.Assignment(
            leases=[_to_proto(lease) for lease in leases], version=version
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
                    leases=[_to_proto(lease) for lease in leases], version=version
                )
            self._registry.wait_for_change(version, 0.2)
