"""``millrace state get``: read one key's persisted state from the node that hosts it.

``millrace state get --config d.toml --computation counts --key alice``
finds the interval that holds the key now -- in the computation's live layout
(split intervals too) -- and the node whose lease it is, as the injector's
ownership registry says (else, without an injector or while it is down, the
deployment's placement of the first intervals), calls ``Admin.GetState`` and
prints each tag and value: pretty JSON if the value parses as JSON, else UTF-8
text, else base64. Exit 0 when found, 1 when the key (or ``--tag``) has no
state, 2 for usage errors or an unreachable node.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from typing import TYPE_CHECKING, TextIO

import grpc

from millrace.commands._grpc_errors import (
    CommandError,
    Service,
    add_timeout_argument,
    load_deployment,
    run_command,
    talking_to,
)
from millrace.commands._options import add_config_argument
from millrace.computations import KeyInterval, Layout, interval_of
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, control_pb2, control_pb2_grpc

if TYPE_CHECKING:
    from millrace.deployment import Deployment

EXIT_FOUND = 0
EXIT_NOT_FOUND = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``state`` sub-command (with ``get``)."""
    parser = subparsers.add_parser(
        "state",
        help="read a key's persisted state",
        description="Read persisted per-key state from the node hosting the key.",
    )
    actions = parser.add_subparsers(dest="state_command", metavar="ACTION", required=True)
    get = actions.add_parser(
        "get",
        help="print one key's state tags and values",
        description=(
            "Find the node hosting KEY's interval of COMPUTATION and print the key's state: "
            "each tag with its value (pretty JSON if it parses, else UTF-8 text, else base64). "
            "Exit 1 if the key has no state."
        ),
    )
    add_config_argument(get)
    get.add_argument("--computation", required=True, help="the computation whose state to read")
    key = get.add_mutually_exclusive_group(required=True)
    key.add_argument("--key", help="the key, as UTF-8 text")
    key.add_argument("--key-base64", metavar="B64", help="the key's bytes, base64-encoded")
    get.add_argument("--tag", help="only this state tag")
    add_timeout_argument(get)
    get.set_defaults(handler=run_get)


def format_value(value: bytes) -> str:
    """Pretty JSON if ``value`` parses as JSON, else UTF-8 text, else ``base64:...``."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode("ascii")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def show_bytes(data: bytes) -> str:
    """A key for humans: quoted UTF-8 text, else ``base64:...``."""
    try:
        return json.dumps(data.decode("utf-8"), ensure_ascii=False)
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def run_get(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Print the key's state; return the exit code."""
    return run_command("state get", lambda: _get(args, out or sys.stdout))


def _key_bytes(args: argparse.Namespace) -> bytes:
    if args.key is not None:
        key: bytes = args.key.encode("utf-8")
        return key
    try:
        return base64.b64decode(args.key_base64, validate=True)
    except (binascii.Error, ValueError):
        raise CommandError(f"--key-base64 {args.key_base64!r} is not valid base64") from None


def _holder(
    deployment: Deployment, computation: str, key: bytes, timeout: float
) -> tuple[int, str, str]:
    """The interval (by id) holding ``key`` now, and the id and address of the node that
    serves it: by the injector's assignment (the live layout and leases), else by the
    deployment's placement of the first intervals."""
    base = deployment.topology.computations[computation].intervals
    injector = deployment.injector
    if injector is not None:
        try:
            with deployment.security.open_channel(injector.address) as channel:
                assignment = control_pb2_grpc.ControlStub(channel).GetAssignment(
                    control_pb2.GetAssignmentRequest(computations=[computation]), timeout=timeout
                )
        except grpc.RpcError:
            assignment = None  # down or restarting: the placement below
        if assignment is not None:
            ids = (i.index for i in assignment.layout if i.computation == computation)
            index = Layout.of_ids(computation, base, ids).interval_for(key).id(base)
            for lease in assignment.leases:
                if (lease.interval.computation, lease.interval.index) == (computation, index):
                    return index, lease.node_id, lease.address
    index = interval_of(key, base)
    node = next(
        n
        for n in deployment.nodes.values()
        if n.computation == computation and index in n.intervals
    )  # the deployment is validated: every interval is hosted exactly once
    return index, node.name, node.address


def _get(args: argparse.Namespace, out: TextIO) -> int:
    deployment = load_deployment(args.deployment)
    spec = deployment.topology.computations.get(args.computation)
    if spec is None:
        known = ", ".join(deployment.topology.computations) or "none"
        raise CommandError(
            f"no computation {args.computation!r} in {args.deployment} (computations: {known})"
        )
    key = _key_bytes(args)
    index, node_name, address = _holder(deployment, args.computation, key, args.timeout)
    service = Service.node(node_name, address, args.deployment)
    request = admin_pb2.GetStateRequest(computation=args.computation, key=key)
    with (
        deployment.security.open_channel(address) as channel,
        talking_to(service, "Admin.GetState", args.timeout),
    ):
        response = admin_pb2_grpc.AdminStub(channel).GetState(request, timeout=args.timeout)
    share = KeyInterval.of_id(args.computation, index, spec.intervals)
    named = f"{index} of {spec.intervals}" if index < spec.intervals else (
        f"{index}, split: share {share.index + 1} of {share.count}"
    )  # fmt: skip
    where = (
        f"{args.computation} key {show_bytes(key)} "
        f"(interval {named}, node {node_name} at {address})"
    )
    entries = [e for e in response.entries if args.tag is None or e.tag == args.tag]
    if not entries:
        if args.tag is not None and response.entries:
            tags = ", ".join(e.tag for e in response.entries)
            out.write(f"{where}: no tag {args.tag!r} (tags: {tags})\n")
        else:
            out.write(f"{where}: no state\n")
        return EXIT_NOT_FOUND
    out.write(f"{where}\n")
    for entry in entries:
        value = format_value(entry.value)
        if "\n" in value:
            indented = "\n".join("  " + line for line in value.splitlines())
            out.write(f"{entry.tag} =\n{indented}\n")
        else:
            out.write(f"{entry.tag} = {value}\n")
    out.flush()
    return EXIT_FOUND
