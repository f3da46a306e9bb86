"""``millrace state get``: read one key's persisted state from the node that hosts it.

``millrace state get --config d.toml --computation counts --key alice``
hashes the key into the computation's intervals (``interval_of``), finds the
node the deployment places that interval on, calls ``Admin.GetState`` and
prints each tag and value: pretty JSON if the value parses as JSON, else
UTF-8 text, else base64. Exit 0 when found, 1 when the key (or ``--tag``)
has no state, 2 for usage errors or an unreachable node.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from typing import TextIO

from millrace.commands._grpc_errors import (
    CommandError,
    Service,
    add_timeout_argument,
    load_deployment,
    run_command,
    talking_to,
)
from millrace.commands._options import add_config_argument
from millrace.computations import interval_of
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc

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


def _get(args: argparse.Namespace, out: TextIO) -> int:
    deployment = load_deployment(args.deployment)
    spec = deployment.topology.computations.get(args.computation)
    if spec is None:
        known = ", ".join(deployment.topology.computations) or "none"
        raise CommandError(
            f"no computation {args.computation!r} in {args.deployment} (computations: {known})"
        )
    key = _key_bytes(args)
    index = interval_of(key, spec.intervals)
    node = next(
        n
        for n in deployment.nodes.values()
        if n.computation == args.computation and index in n.intervals
    )  # the deployment is validated: every interval is hosted exactly once
    service = Service.node(node.name, node.address, args.deployment)
    request = admin_pb2.GetStateRequest(computation=args.computation, key=key)
    with (
        deployment.security.open_channel(node.address) as channel,
        talking_to(service, "Admin.GetState", args.timeout),
    ):
        response = admin_pb2_grpc.AdminStub(channel).GetState(request, timeout=args.timeout)
    where = (
        f"{args.computation} key {show_bytes(key)} "
        f"(interval {index} of {spec.intervals}, node {node.name} at {node.address})"
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
