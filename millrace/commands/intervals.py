"""``millrace intervals``: where key intervals run, and moving one to another node, live.

``millrace intervals list --config d.toml`` prints every interval's node, epoch and
load (records/s, the CPU share its worker uses), the moves under way and the newest changes.
``millrace intervals move --config d.toml --computation C --interval I --to NODE``
records the move with the injector's registry (``Control.MoveInterval``), then waits
until the interval's lease names ``NODE`` (the node takes the state from the current
owner and registers it at a new epoch; ``docs/intervals.md``). ``--no-wait`` returns
once the move is recorded. ``millrace intervals split --config d.toml --computation C
--interval I`` records that the interval splits into its two halves
(``Control.SplitInterval``) and waits until both run (each half's id is printed);
``millrace intervals merge ... --interval I`` merges half ``I`` and its other half back
(``Control.MergeInterval``; both must run on one node) and waits until the whole runs.
Exit status 0 when done, 1 when ``--wait-s`` passed first, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import grpc

from millrace.commands._grpc_errors import (
    EXIT_USAGE,
    CommandError,
    Service,
    add_injector_client_arguments,
    add_wait_argument,
    injector_service,
    refusals_as_usage,
    run_command,
    security_of,
    talking_to,
)
from millrace.commands.nodes import describe_change, read_layout
from millrace.wire.v1 import control_pb2, control_pb2_grpc, record_pb2

EXIT_NOT_YET = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``intervals`` sub-command (``list``, ``move``, ``split``, ``merge``)."""
    parser = subparsers.add_parser(
        "intervals",
        help="show where key intervals run; move one to another node, live",
        description="Show each key interval's lease, or move an interval to another node.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", help="every interval's node and load, the moves under way, the last changes"
    )
    move = actions.add_parser(
        "move",
        help="move an interval to another node of its computation",
        description=(
            "Record the move with the injector's registry, then wait until the interval "
            "runs on NODE (its state taken from the current owner, which stops first)."
        ),
    )
    split = actions.add_parser(
        "split",
        help="split an interval into its two halves, live",
        description=(
            "Record the split with the injector's registry, then wait until both halves "
            "run on the interval's node (move either elsewhere afterwards)."
        ),
    )
    merge = actions.add_parser(
        "merge",
        help="merge an interval and its other half back into one, live",
        description=(
            "Record the merge with the injector's registry, then wait until the merged "
            "interval runs (both halves must run on one node: move one first)."
        ),
    )
    for sub in (listing, move, split, merge):
        add_injector_client_arguments(sub)
    merge.add_argument("--computation", required=True, metavar="NAME")
    merge.add_argument("--interval", required=True, type=int, metavar="ID")
    add_wait_argument(merge, default_s=120.0, what="the merged interval to run")
    merge.set_defaults(handler=lambda args: run_command("intervals", lambda: _merge(args)))
    split.add_argument("--computation", required=True, metavar="NAME")
    split.add_argument("--interval", required=True, type=int, metavar="ID")
    add_wait_argument(split, default_s=120.0, what="the halves to run")
    split.set_defaults(handler=lambda args: run_command("intervals", lambda: _split(args)))
    move.add_argument("--computation", required=True, metavar="NAME")
    move.add_argument("--interval", required=True, type=int, metavar="INDEX")
    move.add_argument("--to", required=True, metavar="NODE", help="the node to move it to")
    add_wait_argument(move, default_s=120.0, what="the move to finish")
    listing.set_defaults(handler=lambda args: run_command("intervals", lambda: _list(args)))
    move.set_defaults(handler=lambda args: run_command("intervals", lambda: _move(args)))


def _assignment(stub: control_pb2_grpc.ControlStub, timeout: float) -> control_pb2.Assignment:
    answer: control_pb2.Assignment = stub.GetAssignment(
        control_pb2.GetAssignmentRequest(), timeout=timeout
    )
    return answer


def _leases_of(
    stub: control_pb2_grpc.ControlStub, args: argparse.Namespace
) -> list[control_pb2.IntervalLease]:
    """The current leases of ``args.computation`` (none while the injector restarts)."""
    try:
        leases = _assignment(stub, args.timeout).leases
    except grpc.RpcError:
        return []
    return [lease for lease in leases if lease.interval.computation == args.computation]


def _first_count(
    service: Service, stub: control_pb2_grpc.ControlStub, args: argparse.Namespace
) -> int:
    """The first interval count of ``args.computation``, as its leases say."""
    with talking_to(service, "Control.GetAssignment", args.timeout):
        count = next(
            (
                lease.interval.count
                for lease in _assignment(stub, args.timeout).leases
                if lease.interval.computation == args.computation
            ),
            None,
        )
    if count is None:
        raise CommandError(f"no interval of {args.computation!r} is leased yet")
    return count


def _list(args: argparse.Namespace) -> int:
    layout = read_layout(args)
    print(f"{'interval':<28} {'node':<20} {'epoch':>6} {'rec/s':>9} {'cpu':>5}  move")
    for state in layout.intervals:
        name = f"{state.interval.computation}/{state.interval.index}"
        node = state.node_id or "-"
        move = f"-> {state.moving_to}" if state.moving_to else ""
        print(
            f"{name:<28} {node:<20} {state.epoch:>6} {state.records_per_second:>9.0f} "
            f"{state.cpu:>5.0%}  {move}"
        )
    for change in layout.changes[-10:]:
        print(describe_change(change))
    return 0


def _move(args: argparse.Namespace) -> int:
    if args.interval < 0:
        raise CommandError("--interval must be 0 or more", exit_code=EXIT_USAGE)
    service, deployment = injector_service(args.deployment, args.injector)
    with security_of(deployment).open_channel(service.address) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        count = _first_count(service, stub, args)
        request = control_pb2.MoveIntervalRequest(
            interval=record_pb2.KeyInterval(
                computation=args.computation, index=args.interval, count=count
            ),
            to_node_id=args.to,
        )
        answer: control_pb2.MoveIntervalResponse = refusals_as_usage(
            service, "Control.MoveInterval", args.timeout,
            lambda: stub.MoveInterval(request, timeout=args.timeout),
        )  # fmt: skip
        where = f"{args.computation}/{args.interval}"
        holder = answer.current.node_id if answer.HasField("current") else "no node yet"
        print(f"moving {where}: {holder} -> {args.to}", flush=True)
        if args.no_wait:
            return 0
        started = time.monotonic()
        deadline = started + args.wait_s
        while time.monotonic() < deadline:
            for lease in _leases_of(stub, args):
                if lease.interval.index == args.interval and lease.node_id == args.to:
                    took = time.monotonic() - started
                    print(f"moved {where} to {args.to} (epoch {lease.epoch}) in {took:.1f} s")
                    return 0
            time.sleep(0.2)
    print(f"millrace intervals: {where} is not on {args.to} yet after {args.wait_s:g} s")
    return EXIT_NOT_YET


def _split(args: argparse.Namespace) -> int:
    def record(stub: control_pb2_grpc.ControlStub, interval: record_pb2.KeyInterval) -> set[int]:
        request = control_pb2.SplitIntervalRequest(interval=interval)
        answer: control_pb2.SplitIntervalResponse = stub.SplitInterval(
            request, timeout=args.timeout
        )
        low, high = (half.index for half in answer.halves)
        print(f"splitting {args.computation}/{args.interval} into /{low} and /{high}")
        return {low, high}

    return _reshape(args, "Control.SplitInterval", record, "split")


def _merge(args: argparse.Namespace) -> int:
    def record(stub: control_pb2_grpc.ControlStub, interval: record_pb2.KeyInterval) -> set[int]:
        request = control_pb2.MergeIntervalRequest(interval=interval)
        answer: control_pb2.MergeIntervalResponse = stub.MergeInterval(
            request, timeout=args.timeout
        )
        whole = answer.whole.index
        print(f"merging {args.computation}/{args.interval} and its other half into /{whole}")
        return {whole}

    return _reshape(args, "Control.MergeInterval", record, "merged")


def _reshape(
    args: argparse.Namespace,
    method: str,
    record: Callable[[control_pb2_grpc.ControlStub, record_pb2.KeyInterval], set[int]],
    done: str,
) -> int:
    """Record a split or a merge of ``args.interval`` (``record`` calls ``method`` and
    says which intervals it makes), then wait until they all run."""
    if args.interval < 0:
        raise CommandError("--interval must be 0 or more", exit_code=EXIT_USAGE)
    service, deployment = injector_service(args.deployment, args.injector)
    where = f"{args.computation}/{args.interval}"
    with security_of(deployment).open_channel(service.address) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        count = _first_count(service, stub, args)
        interval = record_pb2.KeyInterval(
            computation=args.computation, index=args.interval, count=count
        )
        made = refusals_as_usage(service, method, args.timeout, lambda: record(stub, interval))
        if args.no_wait:
            return 0
        started = time.monotonic()
        deadline = started + args.wait_s
        while time.monotonic() < deadline:
            running = {lease.interval.index for lease in _leases_of(stub, args)}
            if running.issuperset(made):
                print(f"{done} {where} in {time.monotonic() - started:.1f} s")
                return 0
            time.sleep(0.2)
    ids = ", ".join(f"{args.computation}/{i}" for i in sorted(made))
    print(f"millrace intervals: {ids} not running yet after {args.wait_s:g} s")
    return EXIT_NOT_YET
