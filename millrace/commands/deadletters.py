"""``millrace deadletters``: records a computation gave up on, with the error, from every node.

Calls ``Admin.ListDeadLetters`` (paging by record id) on every node hosting
the computation (or every node), at once, each call with a deadline, and
prints computation, record id (hex), key, value, attempts, when, and the
error. Nodes that do not answer are reported with what to check (exit 2);
the others are still listed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

import grpc

from millrace.commands._grpc_errors import (
    EXIT_USAGE,
    CommandError,
    Service,
    add_timeout_argument,
    explain,
    load_deployment,
    positive_int,
    run_command,
)
from millrace.commands._options import add_config_argument
from millrace.commands.state import show_bytes
from millrace.commands.watermarks import iso_utc
from millrace.deployment import NodePlacement
from millrace.deployment.security import Security
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc

DEFAULT_LIMIT = 100
PAGE = 500
SHOWN_VALUE_CHARS = 40


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``deadletters`` sub-command."""
    parser = subparsers.add_parser(
        "deadletters",
        help="list records computations gave up on, with their errors",
        description=(
            "List dead letters (records a computation failed on max_attempts times) from "
            "every node hosting COMPUTATION (default: every node): computation, record id, "
            "key, value, attempts, time and error."
        ),
    )
    add_config_argument(parser)
    parser.add_argument("--computation", help="only this computation (default: all)")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"list at most N dead letters (default: {DEFAULT_LIMIT})",
    )
    add_timeout_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Print the dead letters; return 0, or 2 if a node did not answer."""
    return run_command("deadletters", lambda: _run(args, out or sys.stdout))


def _run(args: argparse.Namespace, out: TextIO) -> int:
    deployment = load_deployment(args.deployment)
    computations = deployment.topology.computations
    if args.computation is not None and args.computation not in computations:
        known = ", ".join(computations) or "none"
        raise CommandError(
            f"no computation {args.computation!r} in {args.deployment} (computations: {known})"
        )
    nodes = sorted(
        (
            node
            for node in deployment.nodes.values()
            if args.computation is None or node.computation == args.computation
        ),
        key=lambda node: node.name,
    )
    letters: list[Any] = []
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(nodes)))) as pool:
        futures = [
            pool.submit(
                _list_node, node, args.deployment, args.limit, args.timeout, deployment.security
            )
            for node in nodes
        ]
        for future in futures:
            found, failure = future.result()
            letters.extend(found)
            if failure is not None:
                failures.append(failure)
    letters.sort(key=lambda letter: (letter.computation, letter.record.record_id))
    more = len(letters) > args.limit
    _print(out, letters[: args.limit])
    if more:
        out.write(f"(showing the first {args.limit}; there are more: raise --limit)\n")
    out.flush()
    for failure in failures:
        print(f"millrace deadletters: {failure}", file=sys.stderr)
    if failures:
        print(
            f"millrace deadletters: {len(failures)} of {len(nodes)} nodes did not answer; "
            "the listing above is incomplete",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return 0


def _list_node(
    node: NodePlacement, deployment_path: str, limit: int, timeout_s: float, security: Security
) -> tuple[list[Any], str | None]:
    """Up to ``limit + 1`` dead letters of the node's computation, or why not."""
    found: list[Any] = []
    after = b""
    with security.open_channel(node.address) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        while len(found) <= limit:
            want = min(PAGE, limit + 1 - len(found))
            request = admin_pb2.ListDeadLettersRequest(
                computation=node.computation, limit=want, after_record_id=after
            )
            try:
                page = stub.ListDeadLetters(request, timeout=timeout_s).dead_letters
            except grpc.RpcError as error:
                service = Service.node(node.name, node.address, deployment_path)
                return found, explain(error, service, "Admin.ListDeadLetters", timeout_s)
            found.extend(page)
            if len(page) < want:
                break
            after = page[-1].record.record_id
    return found, None


def _print(out: TextIO, letters: Sequence[Any]) -> None:
    if not letters:
        out.write("no dead letters\n")
        return
    header = ("computation", "record id", "key", "value", "attempts", "failed at", "error")
    rows = []
    for letter in letters:
        value = show_bytes(letter.record.value)
        if len(value) > SHOWN_VALUE_CHARS:
            value = value[: SHOWN_VALUE_CHARS - 3] + "..."
        error = " ".join(line.strip() for line in letter.error.strip().splitlines())
        rows.append(
            (
                letter.computation,
                letter.record.record_id.hex(),
                show_bytes(letter.record.key),
                value,
                str(letter.attempts),
                iso_utc(letter.failed_at_ms),
                error,
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")
    out.write(f"{len(letters)} dead letter{'s' if len(letters) != 1 else ''}\n")
