"""``millrace sql``: plan a SQL file onto library computations (``docs/sql.md``).

    millrace sql query.sql --topology topology.toml [--write-deployment deployment.toml]
    millrace sql query.sql --explain

Reads ``CREATE TABLE``, ``CREATE VIEW`` and ``INSERT INTO ... SELECT`` statements and
writes the topology they plan to (standard output without ``--topology``), optionally
a deployment file placing every computation on a local node with a file sink per sink
stream (``millrace up --config`` it). ``--explain`` (or an ``EXPLAIN INSERT ...``
statement) prints the plan. SQL that cannot be planned: the message, exit code 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

import tomli_w


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sql`` sub-command."""
    parser = subparsers.add_parser(
        "sql",
        help="plan SQL (CREATE TABLE, CREATE VIEW, INSERT INTO ... SELECT) into a topology",
        description=(
            "Plan the statements of a SQL file onto library computations; write the "
            "topology (and, if asked, a local deployment), or print the plan."
        ),
    )
    parser.add_argument("file", type=Path, help="the SQL file ('-': standard input)")
    parser.add_argument("--topology", type=Path, metavar="FILE",
                        help="write the topology here (default: print it)")  # fmt: skip
    parser.add_argument(
        "--write-deployment",
        type=Path,
        metavar="FILE",
        help="also write a deployment file: every computation on a local node, a file sink "
        "per sink stream (needs --topology)",
    )
    parser.add_argument("--port", type=int, default=7400,
                        help="the first port of the written deployment (default 7400)")  # fmt: skip
    parser.add_argument("--intervals", type=int, default=1,
                        help="key intervals of every computation (default 1)")  # fmt: skip
    parser.add_argument("--explain", action="store_true", help="print the plan")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Plan; write or print; return the exit code (2 for SQL that cannot be planned)."""
    from millrace.streamsql import SqlError, compile_sql

    out = out or sys.stdout
    try:
        text = sys.stdin.read() if str(args.file) == "-" else args.file.read_text()
    except OSError as exc:
        print(f"millrace sql: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.write_deployment is not None and args.topology is None:
        print("millrace sql: --write-deployment needs --topology", file=sys.stderr)
        return 2
    try:
        pipeline = compile_sql(text, intervals=args.intervals)
    except SqlError as exc:
        print(f"millrace sql: {args.file}: {exc}", file=sys.stderr)
        return 2
    if args.explain or pipeline.explained:
        out.write(pipeline.explain())
    if args.topology is not None:
        pipeline.write_topology(args.topology)
        out.write(f"wrote {args.topology}: {len(pipeline.topology['computations'])} "
                  f"computation(s); sources {', '.join(pipeline.sources)}; "
                  f"sinks {', '.join(pipeline.sinks)}\n")  # fmt: skip
    elif not (args.explain or pipeline.explained):
        out.write(pipeline.toml())
    if args.write_deployment is not None:
        deployment = pipeline.deployment(
            topology=os.path.relpath(
                args.topology.resolve(), args.write_deployment.resolve().parent
            ),
            first_port=args.port,
        )
        args.write_deployment.write_text(tomli_w.dumps(deployment))
        out.write(f"wrote {args.write_deployment}: millrace up --config {args.write_deployment}\n")
    return 0
