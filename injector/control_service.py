"""The ``Control`` gRPC service: interval leases and epochs, served by the injector."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import grpc

from millrace.computations import IntervalId, KeyInterval
from millrace.deployment import NodePlacement, abort, brief
from millrace.injector.ownership import Lease, OwnershipRegistry
from millrace.injector.rebalance import (
    IntervalSample,
    LoadTable,
    interval_places,
    plan_drain,
    takers,
)
from millrace.wire.v1 import control_pb2, control_pb2_grpc, record_pb2

MAX_REPORTED_INTERVALS = 65_536
"""Most intervals one load report may carry."""


@contextmanager
def _journal_answers(context: grpc.ServicerContext, refused: grpc.StatusCode) -> Iterator[None]:
    """A ``ValueError`` of the registry (nothing recorded) ends the call with ``refused``;
    an ``OSError`` (its journal cannot be written: a full disk; nothing granted) with
    UNAVAILABLE, which clients retry."""
    try:
        yield
    except ValueError as exc:
        abort(context, refused, str(exc))
    except OSError as exc:
        abort(
            context, grpc.StatusCode.UNAVAILABLE, f"the ownership journal cannot be written: {exc}"
        )


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


def _split_layouts(
    registry: OwnershipRegistry, computations: list[str]
) -> list[record_pb2.KeyInterval]:
    """Every interval, by id, of each computation (of ``computations``, or all) that
    has split intervals."""
    counts = registry.interval_counts()
    found: list[record_pb2.KeyInterval] = []
    for computation in sorted(counts):
        if computations and computation not in computations:
            continue
        layout = registry.layout(computation)
        if layout.uniform != layout.base_count:
            count = counts[computation]
            found.extend(
                record_pb2.KeyInterval(computation=computation, index=ident, count=count)
                for ident in layout.ids()
            )
    return found


def _by_id(interval: KeyInterval, count: int) -> record_pb2.KeyInterval:
    """``interval`` as the wire names it: by id, with its computation's first count."""
    return record_pb2.KeyInterval(
        computation=interval.computation, index=interval.id(count), count=count
    )


class ControlService(control_pb2_grpc.ControlServicer):
    """RegisterNode hands out fresh epochs; GetAssignment/WatchAssignment show the leases
    and the moves; MoveInterval records a move; ReportLoad takes the nodes' heartbeats
    and load; DrainNode drains a node; GetLayout shows the layout, loads and changes."""

    def __init__(
        self,
        registry: OwnershipRegistry,
        nodes: Mapping[str, NodePlacement] | None = None,
        *,
        loads: LoadTable | None = None,
        rebalancing: bool = False,
    ) -> None:
        """``nodes``: the deployment's nodes; ``loads``: where load reports go;
        ``rebalancing``: whether the rebalancer runs (shown by GetLayout)."""
        self._registry = registry
        self._nodes = dict(nodes or {})
        self._node_computations = {name: node.computation for name, node in self._nodes.items()}
        self._loads = LoadTable() if loads is None else loads
        self._rebalancing = rebalancing

    def RegisterNode(
        self, request: control_pb2.RegisterNodeRequest, context: grpc.ServicerContext
    ) -> control_pb2.RegisterNodeResponse:
        with _journal_answers(context, grpc.StatusCode.INVALID_ARGUMENT):
            leases = self._registry.register(
                request.node_id,
                request.computation,
                request.address,
                request.interval_indexes,
                {stored.index: stored.epoch for stored in request.stored_epochs},
            )
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
        with _journal_answers(context, grpc.StatusCode.INVALID_ARGUMENT):
            current = self._registry.move(interval.computation, interval.index, to)
        return control_pb2.MoveIntervalResponse(
            move=control_pb2.IntervalMove(interval=interval, to_node_id=to),
            current=None if current is None else _to_proto(current),
        )

    def GetAssignment(
        self, request: control_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> control_pb2.Assignment:
        version, leases = self._registry.leases(request.computations)
        return self._assignment(version, leases, request)

    def _assignment(
        self, version: int, leases: list[Lease], request: control_pb2.GetAssignmentRequest
    ) -> control_pb2.Assignment:
        return control_pb2.Assignment(
            leases=[_to_proto(lease) for lease in leases],
            version=version,
            moves=_moves_to_proto(self._registry, list(request.computations)),
            draining=sorted(self._registry.draining()),
            layout=_split_layouts(self._registry, list(request.computations)),
        )

    def MergeInterval(
        self, request: control_pb2.MergeIntervalRequest, context: grpc.ServicerContext
    ) -> control_pb2.MergeIntervalResponse:
        count = self._first_count(request.interval.computation, context)
        with _journal_answers(context, grpc.StatusCode.FAILED_PRECONDITION):
            whole = self._registry.merge(request.interval.computation, request.interval.index)
        return control_pb2.MergeIntervalResponse(whole=_by_id(whole, count))

    def SplitInterval(
        self, request: control_pb2.SplitIntervalRequest, context: grpc.ServicerContext
    ) -> control_pb2.SplitIntervalResponse:
        count = self._first_count(request.interval.computation, context)
        with _journal_answers(context, grpc.StatusCode.FAILED_PRECONDITION):
            halves = self._registry.split(request.interval.computation, request.interval.index)
        return control_pb2.SplitIntervalResponse(halves=[_by_id(h, count) for h in halves])

    def _first_count(self, computation: str, context: grpc.ServicerContext) -> int:
        """``computation``'s first interval count; INVALID_ARGUMENT for an unknown one."""
        count = self._registry.interval_counts().get(computation)
        if count is None:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"unknown computation {brief(computation)}",
            )
        return count

    def WatchAssignment(
        self, request: control_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> Iterator[control_pb2.Assignment]:
        version = -1
        while context.is_active():
            current, leases = self._registry.leases(request.computations)
            if current != version:
                version = current
                yield self._assignment(version, leases, request)
            self._registry.wait_for_change(version, 0.2)

    def ReportLoad(
        self, request: control_pb2.ReportLoadRequest, context: grpc.ServicerContext
    ) -> control_pb2.ReportLoadResponse:
        placed = self._node_computations.get(request.node_id)
        if placed is None:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"no node {brief(request.node_id)} in the deployment",
            )
        if placed != request.computation:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"node {request.node_id} runs {placed}, not {brief(request.computation)}",
            )
        if len(request.intervals) > MAX_REPORTED_INTERVALS:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"a report carries at most {MAX_REPORTED_INTERVALS} intervals",
            )
        self._loads.report(
            request.node_id,
            request.computation,
            [
                IntervalSample(i.index, i.epoch, i.records_committed, i.cpu_seconds)
                for i in request.intervals
            ],
        )
        return control_pb2.ReportLoadResponse()

    def _wait_made(self, computation: str, node_id: str, timeout_s: float = 30.0) -> None:
        """Until ``node_id`` registered the intervals a split or a merge placed on it
        (their stores are made there and nowhere else), for at most ``timeout_s``; the
        drain then refuses them."""
        deadline = time.monotonic() + timeout_s
        while (
            time.monotonic() < deadline and node_id in self._registry.unmade(computation).values()
        ):
            time.sleep(0.2)

    def DrainNode(
        self, request: control_pb2.DrainNodeRequest, context: grpc.ServicerContext
    ) -> control_pb2.DrainNodeResponse:
        node_id = request.node_id
        computation = self._node_computations.get(node_id)
        if computation is None:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"no node {brief(node_id)} in the deployment",
            )
        assert computation is not None
        with _journal_answers(context, grpc.StatusCode.FAILED_PRECONDITION):
            if request.resume:
                self._registry.resume(node_id)
                return control_pb2.DrainNodeResponse()
            self._wait_made(computation, node_id)
            places = interval_places(self._registry, self._nodes, computation)
            targets = takers(self._registry, self._loads, computation) - {node_id}
            owners = {index: place.owner for index, place in places.items()}
            plan = plan_drain(node_id, owners, self._loads.rates(computation), targets)
            if not targets and any(owner == node_id for owner in owners.values()):
                abort(
                    context,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"no other live node of {computation} can take {node_id}'s intervals "
                    "(a node is live while it reports to the injector, every second; right "
                    "after the injector starts, ask again in a few seconds)",
                )
            self._registry.drain(
                node_id, {IntervalId(computation, i): to for i, to in plan.items()}
            )
        counts = self._registry.interval_counts()
        return control_pb2.DrainNodeResponse(
            moves=[
                control_pb2.IntervalMove(
                    interval=record_pb2.KeyInterval(
                        computation=computation, index=index, count=counts[computation]
                    ),
                    to_node_id=to,
                )
                for index, to in sorted(plan.items())
            ]
        )

    def GetLayout(
        self, request: control_pb2.GetLayoutRequest, context: grpc.ServicerContext
    ) -> control_pb2.Layout:
        wanted = set(request.computations)
        counts = self._registry.interval_counts()
        computations = sorted(c for c in counts if not wanted or c in wanted)
        intervals: list[control_pb2.IntervalState] = []
        for computation in computations:
            rates, cpu = self._loads.rates(computation), self._loads.cpu(computation)
            places = interval_places(self._registry, self._nodes, computation)
            for index, place in places.items():
                intervals.append(
                    control_pb2.IntervalState(
                        interval=record_pb2.KeyInterval(
                            computation=computation, index=index, count=counts[computation]
                        ),
                        node_id=place.holder,
                        epoch=place.epoch,
                        records_per_second=rates.get(index, 0.0),
                        cpu=cpu.get(index, 0.0),
                        moving_to=place.owner if place.moving else "",
                    )
                )
        drained = self._registry.draining()
        nodes = [
            control_pb2.NodeState(
                node_id=name,
                computation=computation,
                live=self._loads.is_live(name),
                draining=name in drained,
            )
            for name, computation in sorted(self._node_computations.items())
            if computation in computations
        ]
        changes = [
            control_pb2.LayoutChange(
                at_ms=change.at_ms,
                interval=record_pb2.KeyInterval(
                    computation=change.computation,
                    index=change.index,
                    count=counts.get(change.computation, 0),
                ),
                from_node_id=change.from_node,
                to_node_id=change.to_node,
                reason=change.reason,
            )
            for change in list(self._registry.changes)
            if change.computation in computations
        ]
        return control_pb2.Layout(
            intervals=intervals, nodes=nodes, changes=changes, rebalancing=self._rebalancing
        )
