"""The ``millrace`` command line.

Sub-commands are registered by the part of the system they drive; each one
gets its own ``argparse`` sub-parser and a function that returns an exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from millrace._version import __version__
from millrace.commands import (
    deadletters,
    health,
    inject,
    injector,
    log,
    node,
    security,
    sink,
    spark,
    state,
    status,
    up,
    view,
    watermarks,
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="millrace",
        description="Millrace: exactly-once stateful stream processing over gRPC.",
    )
    parser.add_argument("--version", action="version", version=f"millrace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    injector.register(subparsers)
    inject.register(subparsers)
    watermarks.register(subparsers)
    status.register(subparsers)
    state.register(subparsers)
    deadletters.register(subparsers)
    up.register(subparsers)
    log.register(subparsers)
    spark.register(subparsers)
    node.register(subparsers)
    sink.register(subparsers)
    view.register(subparsers)
    health.register(subparsers)
    security.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    handler = args.handler
    result: int = handler(args)
    return result
