"""``millrace check``: validate a deployment file and its topology without starting anything.

``millrace check --config deployment.toml`` reads the file strictly (every table,
every setting), loads the topology with the user's code (handlers imported, the
``dataflow`` computations' settings checked: a typo, a bad duration, an output the
computation does not declare), checks the placement of every interval, and prints a
summary ending in ``OK``; any problem is printed, naming its file and setting, and the
exit code is 2. Nothing is started and nothing is contacted.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from millrace.commands._grpc_errors import load_deployment, run_command
from millrace.commands._options import add_config_argument


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``check`` sub-command."""
    parser = subparsers.add_parser(
        "check",
        help="validate a deployment file and its topology without starting anything",
        description=(
            "Read the deployment file and its topology as the services do (user code "
            "imported, settings checked) and print a summary; exit 0 when both are valid, "
            "2 with every problem named otherwise."
        ),
    )
    add_config_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Validate; print the summary (or the problems); return the exit code."""
    return run_command("check", lambda: _check(args, out or sys.stdout))


def _check(args: argparse.Namespace, out: TextIO) -> int:
    deployment = load_deployment(args.deployment)
    topology = deployment.topology
    out.write(f"{args.deployment}: topology {deployment.topology_file}\n")
    out.write(f"  sources: {', '.join(topology.sources()) or '-'}\n")
    out.write(f"  sinks:   {', '.join(topology.sinks()) or '-'}\n")
    for name, spec in topology.computations.items():
        hosts = sorted(n.name for n in deployment.nodes.values() if n.computation == name)
        out.write(
            f"  computation {name}: {spec.handler if isinstance(spec.handler, str) else name}, "
            f"{spec.intervals} interval(s) on {', '.join(hosts)}\n"
        )
    injector = deployment.injector.address if deployment.injector else "none"
    out.write(f"  injector: {injector}\n")
    out.write("OK: the deployment and its topology are valid\n")
    return 0
