"""The ``millrace`` command line.

Sub-commands are registered by the part of the system they drive; each one
gets its own ``argparse`` sub-parser and a function that returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from millrace._version import __version__

COMMANDS: dict[str, str] = {
    "injector": "injector",
    "inject": "inject",
    "finish": "inject",
    "watermarks": "watermarks",
    "status": "status",
    "intervals": "intervals",
    "nodes": "nodes",
    "state": "state",
    "deadletters": "deadletters",
    "up": "up",
    "check": "check",
    "log": "log",
    "backfill": "spark",
    "replay": "spark",
    "bootstrap": "spark",
    "node": "node",
    "sink": "sink",
    "view": "view",
    "health": "health",
    "security": "security",
    "sql": "sql",
}
"""Each sub-command and the module of ``millrace.commands`` that registers it, in the
order ``--help`` lists them. Running one imports its module only: a client command
starts without loading the servers."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser: with ``command``, only the sub-commands of its module (what
    running it needs); without, every sub-command (for the help)."""
    parser = argparse.ArgumentParser(
        prog="millrace",
        description="Millrace: exactly-once stateful stream processing over gRPC.",
    )
    parser.add_argument("--version", action="version", version=f"millrace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = COMMANDS.get(command) if command is not None else None
    for module in dict.fromkeys(COMMANDS.values()):
        if wanted is None or module == wanted:
            importlib.import_module(f"millrace.commands.{module}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    handler = args.handler
    try:
        result: int = handler(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (``millrace status | head``): stop quietly, and keep
        # Python from reporting the closed pipe again when it flushes at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return result
