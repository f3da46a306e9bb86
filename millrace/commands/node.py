"""``millrace node``: run one computation node until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import os
import sys

from computations._deployment import Deployment
from computations._node import Node
from millrace._logging import configure_logging
from millrace._service_support import enable_stack_dumps, wait_for_stop_signal
from statestore import StoreConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``node`` sub-command."""
    parser = subparsers.add_parser(
        "node",
        help="run a computation node (the key intervals one [nodes.NAME] entry places)",
        description="Run the computation node NAME of a deployment file until SIGTERM/SIGINT.",
    )
    parser.add_argument("--deployment", required=True, help="deployment TOML file")
    parser.add_argument("--name", required=True, help="which [nodes.NAME] entry to run")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("MILLRACE_DATA_DIR", "data"),
        help="where interval stores live (env MILLRACE_DATA_DIR; default: data)",
    )
    parser.add_argument(
        "--no-sync",
        action="store_true",
        help="do not fsync commits (survives process crashes, not machine crashes)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start the node, print where it listens, serve until signalled, drain, exit 0."""
    # A record crosses several threads per hop (gRPC reader, worker, sender); with the
    # default 5 ms GIL switch interval each handoff can wait that long behind a busy worker.
    sys.setswitchinterval(0.0005)
    configure_logging()
    enable_stack_dumps()
    deployment = Deployment.load(args.deployment)
    if args.name not in deployment.nodes:
        known = ", ".join(sorted(deployment.nodes))
        print(
            f"millrace node: no node {args.name!r} in {args.deployment} (known: {known})",
            file=sys.stderr,
        )
        return 2
    node = Node(
        deployment, args.name, args.data_dir, store_config=StoreConfig(sync=not args.no_sync)
    )
    node.start()
    placement = node.placement
    metrics = f", metrics on :{node.metrics_port}" if node.metrics_port else ""
    print(
        f"node {args.name} serving {placement.computation} intervals "
        f"{list(placement.intervals)} on {node.address}{metrics}",
        flush=True,
    )
    wait_for_stop_signal()
    node.stop()
    return 0
