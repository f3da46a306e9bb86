"""``millrace status``: every node's intervals, the sinks and the injector's leases.

Calls ``Admin.Status`` (and the gRPC health check) on every node of the
deployment, the health check on every sink and ``Control.GetAssignment`` on the
injector, all at once, each with a deadline. Prints the injector, a table of
nodes (one row per interval: epoch, outbox backlog, pending timers, input
watermark), the sinks and the leases, noting leases that disagree with the
deployment or with what their node reports. An unreachable service is shown as such,
followed by what to check; the exit code is then 1 (0 when all answer).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TextIO

import grpc
from google.protobuf.json_format import MessageToDict

from millrace.commands._grpc_errors import (
    Service,
    add_timeout_argument,
    explain,
    injector_service,
    load_deployment,
    run_command,
    status_of,
)
from millrace.commands._options import add_config_argument
from millrace.commands.nodes import describe_change
from millrace.commands.watermarks import iso_utc
from millrace.computations import IntervalId
from millrace.deployment import Deployment, NodePlacement
from millrace.deployment.security import Security
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, control_pb2, control_pb2_grpc

EXIT_OK = 0
EXIT_UNREACHABLE = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``status`` sub-command."""
    parser = subparsers.add_parser(
        "status",
        help="show every node's intervals, the sinks and the injector's leases",
        description=(
            "Ask every node of the deployment for its status (Admin.Status, health), every "
            "sink for its health and the injector for the interval leases "
            "(Control.GetAssignment); print them as tables. "
            "Exit 1 if any service is unreachable."
        ),
    )
    add_config_argument(parser)
    parser.add_argument(
        "--injector", metavar="HOST:PORT", help="the injector's address (overrides the deployment)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object, not tables")
    add_timeout_argument(parser)
    parser.set_defaults(handler=run)


@dataclass(slots=True)
class Answer:
    """What one service said, or how it failed."""

    service: Service
    rpc: str
    response: Any = None
    health: str = "unknown"
    error: grpc.RpcError | None = None
    layout: Any = None
    """The injector's ``Control.GetLayout`` (None: another service, or not answered)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def state(self) -> str:
        if self.error is not None:
            code, _ = status_of(self.error)
            return f"UNREACHABLE ({code})" if code in _UNREACHABLE else f"ERROR ({code})"
        if self.health == "SERVING":
            return "healthy"
        if self.health == "unknown":
            return "reachable"
        return f"reachable, {self.health}"


_UNREACHABLE = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "UNIMPLEMENTED"}


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Print the status tables; return 0, or 1 if a service did not answer."""
    return run_command("status", lambda: _run(args, out or sys.stdout))


def _run(args: argparse.Namespace, out: TextIO) -> int:
    deployment = load_deployment(args.deployment)
    injector: Service | None = None
    if args.injector is not None or deployment.injector is not None:
        injector, _ = injector_service(args.deployment, args.injector)
    nodes = sorted(deployment.nodes.values(), key=lambda node: node.name)
    sinks = [
        Service.sink(stream, address, args.deployment,
                     external=stream in deployment.external_sinks)
        for stream, address in sorted(deployment.sinks.items())
    ]  # fmt: skip
    with ThreadPoolExecutor(max_workers=min(32, len(nodes) + len(sinks) + 1)) as pool:
        node_futures = [
            pool.submit(_ask_node, node, args.deployment, args.timeout, deployment.security)
            for node in nodes
        ]
        sink_futures = [
            pool.submit(_ask_sink, sink, args.timeout, deployment.security) for sink in sinks
        ]
        injector_future = (
            pool.submit(_ask_injector, injector, args.timeout, deployment.security)
            if injector is not None
            else None
        )
        answers = [future.result() for future in node_futures]
        sink_answers = [future.result() for future in sink_futures]
        assignment = injector_future.result() if injector_future is not None else None
    sinks_answered = list(zip(sorted(deployment.sinks), sink_answers, strict=True))

    if args.json:
        found = _as_json(nodes, answers, assignment)
        found["sinks"] = [
            {"stream": stream, "address": answer.service.address, "state": answer.state(),
             "external": stream in deployment.external_sinks}
            for stream, answer in sinks_answered
        ]  # fmt: skip
        out.write(json.dumps(found) + "\n")
    elif assignment is None:
        out.write("injector: none in the deployment (no [injector] section)\n\n")
    else:
        version = f"  (assignment version {assignment.response.version})" if assignment.ok else ""
        out.write(f"injector  {assignment.service.address}  {assignment.state()}{version}\n\n")
    if not args.json:
        _print_nodes(out, nodes, answers)
        _print_sinks(out, deployment, sinks_answered)
    if not args.json and assignment is not None and assignment.ok:
        out.write("\n")
        _print_leases(out, deployment, assignment.response.leases, answers)
        if assignment.layout is not None:
            _print_layout(out, assignment.layout)
    out.flush()

    failed = [a for a in ([assignment] if assignment else []) + answers + sink_answers if not a.ok]
    for answer in failed:
        assert answer.error is not None
        message = explain(answer.error, answer.service, answer.rpc, args.timeout)
        print(f"millrace status: {message}", file=sys.stderr)
    return EXIT_UNREACHABLE if failed else EXIT_OK


def _as_json(
    nodes: Sequence[NodePlacement], answers: Sequence[Answer], assignment: Answer | None
) -> dict[str, Any]:
    """What the tables show, as JSON: each node's state and intervals (the ``Admin.Status``
    fields), the injector's state and leases (``Control.GetAssignment``)."""

    def fields(message: Any) -> dict[str, Any]:
        found: dict[str, Any] = MessageToDict(
            message,
            always_print_fields_with_no_presence=True,
            preserving_proto_field_name=True,
            unquote_int64_if_possible=True,
        )
        return found

    injector = None
    if assignment is not None:
        injector = {"address": assignment.service.address, "state": assignment.state(),
                    "leases": [fields(lease) for lease in assignment.response.leases]
                    if assignment.ok else None,
                    "layout": None if assignment.layout is None
                    else fields(assignment.layout)}  # fmt: skip
    return {
        "injector": injector,
        "nodes": [
            {
                "node": node.name,
                "address": node.address,
                "state": answer.state(),
                "computation": node.computation,
                "intervals": [fields(i) for i in answer.response.intervals] if answer.ok else None,
            }
            for node, answer in zip(nodes, answers, strict=True)
        ],
    }


def _health(channel: grpc.Channel, timeout_s: float) -> str:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
        )
    except grpc.RpcError:
        return "unknown"
    name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return name


def _ask_node(
    node: NodePlacement, deployment_path: str, timeout_s: float, security: Security
) -> Answer:
    answer = Answer(Service.node(node.name, node.address, deployment_path), "Admin.Status")
    with security.open_channel(node.address) as channel:
        try:
            answer.response = admin_pb2_grpc.AdminStub(channel).Status(
                admin_pb2.StatusRequest(), timeout=timeout_s
            )
        except grpc.RpcError as error:
            answer.error = error
            return answer
        answer.health = _health(channel, timeout_s)
    return answer


def _ask_sink(service: Service, timeout_s: float, security: Security) -> Answer:
    """A sink's health (a sink of the user's own without the health service: reachable)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    answer = Answer(service, "Health.Check")
    with security.open_channel(service.address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
            )
        except grpc.RpcError as error:
            if status_of(error)[0] != "UNIMPLEMENTED":
                answer.error = error
            return answer
        answer.health = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return answer


def _print_sinks(
    out: TextIO, deployment: Deployment, answers: Sequence[tuple[str, Answer]]
) -> None:
    if not answers:
        return
    out.write("\nsinks\n")
    rows = [
        (stream, answer.service.address, answer.state(),
         "external" if stream in deployment.external_sinks else "millrace sink")
        for stream, answer in answers
    ]  # fmt: skip
    _table(out, ("sink", "address", "state", "served by"), rows)


def _ask_injector(service: Service, timeout_s: float, security: Security) -> Answer:
    answer = Answer(service, "Control.GetAssignment")
    with security.open_channel(service.address) as channel:
        try:
            answer.response = control_pb2_grpc.ControlStub(channel).GetAssignment(
                control_pb2.GetAssignmentRequest(), timeout=timeout_s
            )
        except grpc.RpcError as error:
            answer.error = error
            return answer
        with suppress(grpc.RpcError):  # the leases alone still show where intervals run
            answer.layout = control_pb2_grpc.ControlStub(channel).GetLayout(
                control_pb2.GetLayoutRequest(), timeout=timeout_s
            )
        answer.health = _health(channel, timeout_s)
    return answer


def _print_layout(out: TextIO, layout: Any) -> None:
    """The load per interval, the nodes drained, the newest layout changes."""
    out.write(f"\nlayout  (rebalancer {'on' if layout.rebalancing else 'off'})\n")
    rows = [
        (
            f"{state.interval.computation}/{state.interval.index}",
            state.node_id or "-",
            f"{state.records_per_second:.0f}",
            f"{state.cpu:.0%}",
            f"moving to {state.moving_to}" if state.moving_to else "",
        )
        for state in layout.intervals
    ]
    _table(out, ("interval", "node", "rec/s", "cpu", "note"), rows)
    for node in layout.nodes:
        if node.draining or not node.live:
            state = ("live" if node.live else "not reporting") + (
                ", draining" if node.draining else ""
            )
            out.write(f"node {node.node_id}: {state}\n")
    for change in list(layout.changes)[-10:]:
        out.write(describe_change(change) + "\n")


def _table(out: TextIO, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")


def _print_nodes(out: TextIO, nodes: Sequence[NodePlacement], answers: Sequence[Answer]) -> None:
    header = (
        "node", "address", "state", "computation", "interval", "epoch",
        "outbox", "timers", "input watermark",
    )  # fmt: skip
    rows: list[tuple[str, ...]] = []
    for node, answer in zip(nodes, answers, strict=True):
        state = answer.state()
        if answer.ok and answer.response.node_id != node.name:
            state += f" (answers as {answer.response.node_id!r})"
        first = (node.name, node.address, state)
        blank = ("", "", "")
        if not answer.ok or not answer.response.intervals:
            placed = ",".join(str(i) for i in node.intervals)
            note = "-" if not answer.ok else "none owned"
            rows.append((*first, node.computation, placed, note, "-", "-", "-"))
            continue
        for number, status in enumerate(answer.response.intervals):
            watermark = (
                iso_utc(status.input_low_watermark_ms)
                if status.HasField("input_low_watermark_ms")
                else "none yet"
            )
            rows.append(
                (
                    *(first if number == 0 else blank),
                    status.interval.computation,
                    f"{status.interval.index}/{status.interval.count}",
                    f"{status.epoch} (fenced)" if status.fenced_reason else str(status.epoch),
                    str(status.outbox_size),
                    str(status.pending_timers),
                    watermark,
                )
            )
    if rows:
        _table(out, header, rows)
    else:
        out.write("no nodes in the deployment\n")
    for node, answer in zip(nodes, answers, strict=True):
        for status in answer.response.intervals if answer.ok else ():
            if status.fenced_reason:
                where = f"{status.interval.computation}/{status.interval.index}"
                out.write(f"fenced: {node.name} {where}: {status.fenced_reason}\n")


def _print_leases(
    out: TextIO, deployment: Deployment, leases: Sequence[Any], answers: Sequence[Answer]
) -> None:
    reported: dict[IntervalId, tuple[str, int]] = {}
    for answer in answers:
        if answer.ok:
            for status in answer.response.intervals:
                key = IntervalId(status.interval.computation, status.interval.index)
                reported[key] = (answer.response.node_id, status.epoch)
    placed = {
        (node.computation, index): node.name
        for node in deployment.nodes.values()
        for index in node.intervals
    }
    out.write("leases (from the injector)\n")
    header = ("computation", "interval", "epoch", "node", "address", "note")
    rows: list[tuple[str, ...]] = []
    leased: set[IntervalId] = set()
    for lease in sorted(leases, key=lambda x: (x.interval.computation, x.interval.index)):
        key = IntervalId(lease.interval.computation, lease.interval.index)
        leased.add(key)
        notes = []
        if key in placed and placed[key] != lease.node_id:
            notes.append(f"the deployment places it on {placed[key]}")
        if key in reported and reported[key] != (lease.node_id, lease.epoch):
            node_id, epoch = reported[key]
            notes.append(f"node {node_id} reports epoch {epoch}")
        rows.append(
            (
                key[0],
                f"{key[1]}/{lease.interval.count}",
                str(lease.epoch),
                lease.node_id,
                lease.address,
                "; ".join(notes),
            )
        )
    for (computation, index), name in sorted(placed.items()):
        if (computation, index) not in leased:
            count = deployment.topology.computations[computation].intervals
            rows.append(
                (computation, f"{index}/{count}", "-", "-", "-", f"not leased (placed on {name})")
            )
    _table(out, header, rows)
