"""``millrace nodes``: the deployment's nodes as the injector sees them; drain one.

``millrace nodes list --config d.toml`` prints each node: live (it reported to the
injector within 5 s), draining, and the intervals it runs with their records/s.
``millrace nodes drain NAME --config d.toml`` records (``Control.DrainNode``) a move
of each of the node's intervals to the live node of its computation with the fewest,
then waits until the node holds none; the node then stops by itself (exit 0, not
restarted by ``millrace up``). ``--no-wait`` returns once the moves are recorded.
``millrace nodes resume NAME`` lets a drained node take intervals again (start it;
the rebalancer, when on, gives it work). Exit status 0 when done, 1 when ``--wait-s``
passed first, 2 for bad arguments or a drain no other node can take.
"""

from __future__ import annotations

import argparse
import time

import grpc

from millrace.commands._grpc_errors import (
    add_injector_client_arguments,
    add_wait_argument,
    injector_service,
    refusals_as_usage,
    run_command,
    security_of,
    talking_to,
)
from millrace.wire.v1 import control_pb2, control_pb2_grpc

EXIT_NOT_YET = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``nodes`` sub-command (``list``, ``drain``, ``resume``)."""
    parser = subparsers.add_parser(
        "nodes",
        help="show the nodes and their load; drain one (its intervals move away, it stops)",
        description="Show the deployment's nodes, drain one, or let a drained one work again.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="each node: live, draining, its intervals")
    drain = actions.add_parser(
        "drain",
        help="move a node's intervals to the other nodes, then let it stop",
        description=(
            "Record a move of each of the node's intervals to the live node of its "
            "computation with the fewest, then wait until the node holds none (it then "
            "stops by itself)."
        ),
    )
    resume = actions.add_parser("resume", help="let a drained node take intervals again")
    for sub in (listing, drain, resume):
        add_injector_client_arguments(sub)
    for sub in (drain, resume):
        sub.add_argument("name", metavar="NAME", help="the node ([nodes.NAME])")
    add_wait_argument(drain, default_s=300.0, what="the node to hold no interval")
    listing.set_defaults(handler=lambda args: run_command("nodes", lambda: _list(args)))
    drain.set_defaults(handler=lambda args: run_command("nodes", lambda: _drain(args)))
    resume.set_defaults(handler=lambda args: run_command("nodes", lambda: _resume(args)))


def fetch_layout(stub: control_pb2_grpc.ControlStub, timeout: float) -> control_pb2.Layout:
    """The injector's layout of every computation (raises ``grpc.RpcError``)."""
    answer: control_pb2.Layout = stub.GetLayout(control_pb2.GetLayoutRequest(), timeout=timeout)
    return answer


def describe_change(change: control_pb2.LayoutChange) -> str:
    """One layout change as a line: when (UTC), what moved where, and why."""
    when = time.strftime("%H:%M:%S", time.gmtime(change.at_ms / 1000))
    where = f"{change.interval.computation}/{change.interval.index}"
    source = change.from_node_id or "-"
    if change.reason.startswith("split: "):
        why = change.reason.removeprefix("split: ")
        return f"{when} split {where} in two on {change.to_node_id} ({why})"
    if change.reason.startswith("merge: "):
        why = change.reason.removeprefix("merge: ")
        return f"{when} merged {where} from its halves on {change.to_node_id} ({why})"
    return f"{when} moved {where} {source} -> {change.to_node_id} ({change.reason})"


def read_layout(args: argparse.Namespace) -> control_pb2.Layout:
    """The layout from the injector ``--config``/``--injector`` names."""
    service, deployment = injector_service(args.deployment, args.injector)
    with (
        security_of(deployment).open_channel(service.address) as channel,
        talking_to(service, "Control.GetLayout", args.timeout),
    ):
        return fetch_layout(control_pb2_grpc.ControlStub(channel), args.timeout)


def _list(args: argparse.Namespace) -> int:
    layout = read_layout(args)
    print(f"{'node':<20} {'computation':<16} {'state':<16} {'rec/s':>9}  intervals")
    for node in layout.nodes:
        held = [s for s in layout.intervals if s.node_id == node.node_id]
        state = ("live" if node.live else "not reporting") + (", draining" if node.draining else "")
        rate = sum(s.records_per_second for s in held)
        indexes = " ".join(str(s.interval.index) for s in held) or "-"
        print(f"{node.node_id:<20} {node.computation:<16} {state:<16} {rate:>9.0f}  {indexes}")
    print(f"rebalancer: {'on' if layout.rebalancing else 'off'}")
    return 0


def _drain(args: argparse.Namespace) -> int:
    service, deployment = injector_service(args.deployment, args.injector)
    with security_of(deployment).open_channel(service.address) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        request = control_pb2.DrainNodeRequest(node_id=args.name)
        answer: control_pb2.DrainNodeResponse = refusals_as_usage(
            service, "Control.DrainNode", args.timeout,
            lambda: stub.DrainNode(request, timeout=args.timeout),
        )  # fmt: skip
        for move in answer.moves:
            interval = f"{move.interval.computation}/{move.interval.index}"
            print(f"moving {interval}: {args.name} -> {move.to_node_id}", flush=True)
        print(f"draining {args.name}: {len(answer.moves)} intervals to move", flush=True)
        if args.no_wait:
            return 0
        started = time.monotonic()
        while time.monotonic() < started + args.wait_s:
            try:
                layout = fetch_layout(stub, args.timeout)
            except grpc.RpcError:
                time.sleep(0.2)  # the injector restarting: ask again
                continue
            if not any(s.node_id == args.name for s in layout.intervals):
                took = time.monotonic() - started
                print(f"drained {args.name} in {took:.1f} s: it holds no interval and stops")
                return 0
            time.sleep(0.2)
    print(f"millrace nodes: {args.name} still holds intervals after {args.wait_s:g} s")
    return EXIT_NOT_YET


def _resume(args: argparse.Namespace) -> int:
    service, deployment = injector_service(args.deployment, args.injector)
    with security_of(deployment).open_channel(service.address) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        request = control_pb2.DrainNodeRequest(node_id=args.name, resume=True)
        refusals_as_usage(
            service, "Control.DrainNode", args.timeout,
            lambda: stub.DrainNode(request, timeout=args.timeout),
        )  # fmt: skip
    print(f"{args.name} may take intervals again (start it if it stopped)")
    return 0
