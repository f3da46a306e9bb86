"""``millrace node``: run one computation node until SIGTERM/SIGINT.

The node is chosen by ``--name NAME`` (a ``[nodes.NAME]`` placement) or by
``--computation C --interval I [--interval J ...]``. The configuration is the
routing table: the injector and upstream nodes send interval ``i`` of ``C`` to
the ``address`` of the placement hosting it, so a node must host exactly the
intervals routed to its address (:func:`resolve_node` states the rules).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from millrace.commands._grpc_errors import CommandError, load_deployment
from millrace.commands._options import add_config_argument
from millrace.deployment import (
    WORKER_SWITCH_INTERVAL_S,
    Deployment,
    NodePlacement,
    StopSignals,
    configure_logging,
    enable_stack_dumps,
    settle_garbage_collector,
    tune_threads,
)
from millrace.node import Node
from millrace.statestore import StateStoreError, StoreConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``node`` sub-command."""
    parser = subparsers.add_parser(
        "node",
        help="run a computation node (key intervals of one computation)",
        description=(
            "Run one computation node of a configuration file until SIGTERM/SIGINT: the "
            "[nodes.NAME] placement --name names, or the one hosting exactly the --interval "
            "indexes of --computation."
        ),
    )
    add_config_argument(parser)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--name", help="which [nodes.NAME] placement to run")
    which.add_argument(
        "--computation", metavar="NAME", help="the computation whose --interval indexes to host"
    )
    parser.add_argument(
        "--interval",
        action="append",
        type=int,
        default=[],
        metavar="I",
        help="a key interval of --computation to host (repeat for several)",
    )
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        help=(
            "where to listen: the address the configuration routes the intervals to, or "
            "0.0.0.0/[::] with its port (default: that address)"
        ),
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics here (overrides the placement's metrics_port)",
    )
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
    """Start the node, print where it listens, serve until signalled (or drained by
    ``millrace nodes drain``), stop, exit 0."""
    tune_threads(WORKER_SWITCH_INTERVAL_S)
    configure_logging()
    enable_stack_dumps()
    signals = StopSignals()  # before the ready line: a SIGTERM right after it drains
    try:
        deployment = load_deployment(args.deployment)
        resolved = resolve_node(
            deployment,
            name=args.name,
            computation=args.computation,
            intervals=args.interval,
            address=args.address,
            metrics_port=args.metrics_port,
            config=args.deployment,
        )
    except CommandError as exc:
        print(f"millrace node: {exc.message}", file=sys.stderr)
        return exc.exit_code
    node = Node(
        resolved.deployment,
        resolved.name,
        args.data_dir,
        store_config=store_config(resolved.deployment.nodes[resolved.name], sync=not args.no_sync),
        address=resolved.listen,
    )
    try:
        node.start()
    except (StateStoreError, OSError) as exc:
        # Another process holds a store or the port: this start asked the registry for
        # nothing, so the node that runs keeps its intervals.
        print(f"millrace node: {resolved.name} cannot start: {exc}", file=sys.stderr)
        return 2
    settle_garbage_collector()
    placement = node.placement
    metrics = f", metrics on :{node.metrics_port}" if node.metrics_port else ""
    print(
        f"node {resolved.name} serving {placement.computation} intervals "
        f"{list(placement.intervals)} on {node.address}{metrics}",
        flush=True,
    )
    signals.wait(until=node.drained)
    node.stop()
    if node.drained.is_set():
        print(f"node {resolved.name} drained: its intervals run on other nodes", flush=True)
    return 0


def store_config(placement: NodePlacement, *, sync: bool) -> StoreConfig:
    """The stores' settings of a node (``dedup_retention_ms`` from its placement)."""
    return StoreConfig.for_retention(placement.dedup_retention_ms, sync=sync)


WILDCARD_HOSTS = frozenset({"0.0.0.0", "[::]", "::", ""})
"""Hosts that mean "every interface": ``--address 0.0.0.0:PORT`` listens on the routed port."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolvedNode:
    """What ``millrace node`` runs: ``deployment.nodes[name]``, listening on ``listen``."""

    deployment: Deployment
    """The configuration, with the chosen placement as run (ad hoc, or another metrics port)."""
    name: str
    listen: str


def resolve_node(
    deployment: Deployment,
    *,
    name: str | None = None,
    computation: str | None = None,
    intervals: Sequence[int] = (),
    address: str | None = None,
    metrics_port: int | None = None,
    config: str = "the configuration",
) -> ResolvedNode:
    """The placement a node process runs; :class:`CommandError` says why there is none.

    Other processes send interval ``i`` of a computation to the ``address`` of
    the placement hosting it, so:

    - ``name``: that ``[nodes.NAME]`` placement.
    - ``computation`` + ``intervals``: the placement hosting exactly those
      intervals (it keeps its name, epoch and metrics port).
    - Otherwise an ad-hoc placement ``<computation>-<i>-<j>`` only when the
      intervals are exactly those routed to one address (several placements
      sharing it) and ``address`` is given: it takes their place in this
      process. Any other set overlaps placements whose other intervals would
      reach this node (or whose node would be shadowed): an error.
    - ``address``, when given, is where the node listens. Without an
      ``[injector]`` it must be the routed address or a wildcard host
      (``0.0.0.0``, ``[::]``) with its port; with one, any address: the node
      registers it and senders follow the registry.
    - ``metrics_port`` overrides the placement's (it does not affect routing).
    """
    if name is not None:
        if computation is not None or intervals:
            raise CommandError("pass either --name or --computation with --interval, not both")
        found = deployment.nodes.get(name)
        if found is None:
            known = ", ".join(sorted(deployment.nodes)) or "none"
            raise CommandError(f"no node {name!r} in {config} (known: {known})")
        placement, replaced = found, [name]
    elif computation is None:
        raise CommandError("pass --name NAME or --computation NAME --interval I [--interval J]")
    else:
        placement, replaced = _placement_for(deployment, computation, intervals, address, config)
    listen = placement.address
    if address is not None:
        # With an injector, nodes register where they listen and every sender follows the
        # registry: a node may be started (or replaced) anywhere.
        if deployment.injector is None and not _same_endpoint(address, placement.address):
            raise CommandError(
                f"--address {address} is not where {config} routes {placement.computation!r} "
                f"intervals {list(placement.intervals)} ({placement.address}): other processes "
                f"would not reach this node. Listen there (or on 0.0.0.0 with its port), or "
                f"change the placement's address for every process"
            )
        listen = address
    if metrics_port is not None:
        placement = dataclasses.replace(placement, metrics_port=metrics_port)
    # Routing is unchanged: the placement takes the place of those whose intervals it hosts.
    nodes = {n: p for n, p in deployment.nodes.items() if n not in replaced}
    nodes[placement.name] = placement
    return ResolvedNode(
        deployment=dataclasses.replace(deployment, nodes=nodes), name=placement.name, listen=listen
    )


def _placement_for(
    deployment: Deployment,
    computation: str,
    intervals: Sequence[int],
    address: str | None,
    config: str,
) -> tuple[NodePlacement, list[str]]:
    """The placement for ``intervals`` and the names of the placements it stands for."""
    spec = deployment.topology.computations.get(computation)
    if spec is None:
        known = ", ".join(deployment.topology.computations) or "none"
        raise CommandError(f"no computation {computation!r} in {config} (computations: {known})")
    count = spec.intervals
    if not intervals:
        raise CommandError(
            f"--computation {computation} needs --interval I (it has {count} interval"
            f"{'s' if count != 1 else ''}: 0..{count - 1})"
        )
    wanted = sorted(set(intervals))
    outside = [i for i in wanted if not 0 <= i < count]
    if outside:
        raise CommandError(
            f"{computation!r} has {count} interval{'s' if count != 1 else ''} (0..{count - 1}); "
            f"no interval {', '.join(map(str, outside))}"
        )
    placements = [p for p in deployment.nodes.values() if p.computation == computation]
    for placement in placements:
        if sorted(placement.intervals) == wanted:
            return placement, [placement.name]
    # A validated configuration hosts every interval exactly once: some placements overlap.
    overlapping = sorted(
        (p for p in placements if set(p.intervals) & set(wanted)), key=lambda p: p.name
    )
    routed = {p.address for p in overlapping}
    union = sorted(i for p in overlapping for i in p.intervals)
    if len(routed) == 1 and union == wanted:
        (shared,) = routed
        if address is None:
            raise CommandError(
                f"no single placement hosts {computation!r} intervals {wanted}; they are routed "
                f"to {shared} ({_describe(overlapping)}): pass --address to run them as one node"
            )
        name = "-".join([computation, *map(str, wanted)])
        replaced = [p.name for p in overlapping]
        if name in deployment.nodes and name not in replaced:
            raise CommandError(f"the ad-hoc node name {name!r} is taken by [nodes.{name}]")
        adhoc = NodePlacement(
            name=name,
            computation=computation,
            intervals=tuple(wanted),
            address=shared,
            epoch=max(p.epoch for p in overlapping),
        )
        return adhoc, replaced
    runs = " or ".join(
        f"--name {p.name} ({' '.join(f'--interval {i}' for i in p.intervals)})" for p in overlapping
    )
    raise CommandError(
        f"{computation!r} intervals {wanted} overlap placements of {config} that host other "
        f"intervals too: {_describe(overlapping)}. A node must host exactly the intervals "
        f"routed to its address; run {runs}, or change the [nodes.NAME] placements"
    )


def _describe(placements: Sequence[NodePlacement]) -> str:
    return ", ".join(f"{p.name} hosts {list(p.intervals)} at {p.address}" for p in placements)


def _same_endpoint(listen: str, routed: str) -> bool:
    """``listen`` is ``routed``, or every interface on its port."""
    if listen == routed:
        return True
    host, _, port = listen.rpartition(":")
    return host in WILDCARD_HOSTS and port == routed.rpartition(":")[2]
