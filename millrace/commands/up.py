"""``millrace up``: run a whole deployment on this machine, supervised, until SIGTERM/SIGINT.

Every sink (a ``[sinks.STREAM]`` not marked ``external``) starts first, then the
injector (when the deployment has an ``[injector]``), then every node, each as its
own ``millrace sink`` / ``millrace injector`` / ``millrace node`` child process,
each once the previous one printed its ready line. Children that die are restarted
with backoff (:class:`millrace.supervisor.Supervisor`). On SIGTERM or Ctrl-C the
nodes are stopped first (they drain and flush while the injector and the sinks
still acknowledge), then the injector and the sinks.

Layout under ``--data-dir``: ``log/`` (the injector's durable log), ``nodes/``
(the nodes' interval stores), ``sinks/`` (a sink's output when its table sets no
``path``) and ``logs/<service>.log`` (each child's output).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from millrace.commands._options import add_config_argument
from millrace.deployment import Deployment, configure_logging, enable_stack_dumps
from millrace.supervisor import ChildStartError, StartInterruptedError, Supervisor

INJECTOR = "injector"
SINK_PREFIX = "sink-"
"""A sink's service name under ``up``: ``sink-STREAM`` (its log ``logs/sink-STREAM.log``)."""
_METRICS_IN_READY_LINE = re.compile(r"metrics on :(\d+)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``up`` sub-command."""
    parser = subparsers.add_parser(
        "up",
        help="run the sinks, the injector and every node of a deployment here, restarting "
        "any that die",
        description=(
            "Start every [sinks.STREAM] (but external ones), the [injector] and then every "
            "[nodes.NAME] of a deployment file as supervised child processes; restart them "
            "when they exit; on SIGTERM/SIGINT stop the nodes, then the injector and sinks."
        ),
    )
    add_config_argument(parser)
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("MILLRACE_DATA_DIR", "data"),
        help=(
            "root of the injector log (log/), node stores (nodes/), sink outputs without a "
            "path (sinks/) and process logs (logs/) "
            "(env MILLRACE_DATA_DIR; default: data)"
        ),
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long each service may take to print its ready line (default: 60)",
    )
    parser.set_defaults(handler=run)


@dataclass(frozen=True)
class _Service:
    name: str
    address: str
    metrics_port: int | None


def run(args: argparse.Namespace) -> int:
    """Start everything, print a summary, supervise until signalled, stop in order, exit 0."""
    configure_logging()
    enable_stack_dumps()
    deployment_path = Path(args.deployment).resolve()
    try:
        deployment = Deployment.load(deployment_path)
    except (OSError, tomllib.TOMLDecodeError, ValueError) as e:
        # A DeploymentError lists every problem; the others are unreadable files.
        print(f"millrace up: {args.deployment}: {e}", file=sys.stderr)
        return 2
    problem = _problem(deployment)
    if problem:
        print(f"millrace up: {args.deployment}: {problem}", file=sys.stderr)
        return 2

    data_dir = Path(args.data_dir).resolve()
    log_dir = data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(ready_timeout_s=args.ready_timeout)
    services = _add_children(supervisor, deployment, deployment_path, data_dir, log_dir)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        supervisor.request_stop()  # takes no lock: safe in a signal handler

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        supervisor.start()
    except ChildStartError as error:
        print(f"millrace up: {error}", file=sys.stderr)
        return 1
    except StartInterruptedError:
        print("millrace up: stopped while starting", file=sys.stderr)
        return 0

    try:
        _print_summary(
            supervisor,
            services=services,
            deployment=deployment,
            deployment_path=deployment_path,
            data_dir=data_dir,
            log_dir=log_dir,
        )
        while not supervisor.stop_requested:
            time.sleep(0.2)
        _say("millrace up: stopping (nodes first, then the injector and the sinks)")
    finally:  # whatever happened here, never leave the children running
        supervisor.stop()
    _say("millrace up: stopped")
    return 0


def _say(text: str) -> None:
    """Print to stdout; a reader that went away must not keep ``up`` from stopping its children."""
    with contextlib.suppress(OSError):
        print(text, flush=True)


def _problem(deployment: Deployment) -> str | None:
    """What makes a valid deployment unrunnable by ``up`` (None if nothing)."""
    if deployment.injector is None and not deployment.nodes:
        return "nothing to run: no [injector] and no [nodes.NAME]"
    if deployment.injector is not None and INJECTOR in deployment.nodes:
        return f"node name {INJECTOR!r} clashes with the injector's log file; rename the node"
    for name in deployment.nodes:
        if not name or "/" in name or name.startswith("."):
            return f"node name {name!r} cannot name a log file; rename the node"
        if name.startswith(SINK_PREFIX):
            return f"node name {name!r} looks like a sink's service name; rename the node"
    for stream in _run_sinks(deployment):
        if "/" in stream or stream.startswith("."):
            return f"sink stream {stream!r} cannot name a log file; mark it external = true"
    return None


def _run_sinks(deployment: Deployment) -> list[str]:
    """The sink streams ``up`` runs a ``millrace sink`` for, in name order."""
    return sorted(set(deployment.sinks) - deployment.external_sinks)


def _add_children(
    supervisor: Supervisor,
    deployment: Deployment,
    deployment_path: Path,
    data_dir: Path,
    log_dir: Path,
) -> list[_Service]:
    """Register the sinks and the injector (tier 0, stopped last) and the nodes (tier 1)
    in start order."""
    millrace = [sys.executable, "-m", "millrace"]
    services: list[_Service] = []
    for stream in _run_sinks(deployment):
        name = SINK_PREFIX + stream
        path = str(deployment.sink_output(stream, data_dir))
        supervisor.add(
            name,
            [*millrace, "sink", "--config", str(deployment_path), "--stream", stream,
             "--path", path],
            log_dir / f"{name}.log",
            ready_prefix=f"sink {stream} serving",
            tier=0,
        )  # fmt: skip
        services.append(
            _Service(name, deployment.sinks[stream], deployment.sink_metrics_ports.get(stream))
        )
    if deployment.injector is not None:
        supervisor.add(
            INJECTOR,
            [*millrace, "injector", "--config", str(deployment_path),
             "--log-dir", str(data_dir / "log")],
            log_dir / f"{INJECTOR}.log",
            ready_prefix="injector serving",
            tier=0,
        )  # fmt: skip
        services.append(
            _Service(INJECTOR, deployment.injector.address, deployment.injector.metrics_port)
        )
    for name, node in deployment.nodes.items():
        supervisor.add(
            name,
            [*millrace, "node", "--config", str(deployment_path), "--name", name,
             "--data-dir", str(data_dir / "nodes")],
            log_dir / f"{name}.log",
            ready_prefix=f"node {name} serving",
            tier=1,
        )  # fmt: skip
        services.append(_Service(name, node.address, node.metrics_port))
    return services


def _print_summary(
    supervisor: Supervisor,
    *,
    services: list[_Service],
    deployment: Deployment,
    deployment_path: Path,
    data_dir: Path,
    log_dir: Path,
) -> None:
    rows = [("SERVICE", "ADDRESS", "PID", "METRICS")]
    for service in services:
        pid = supervisor.pid(service.name)
        rows.append(
            (
                service.name,
                service.address,
                str(pid) if pid is not None else "-",
                _metrics_url(service, supervisor.ready_line(service.name)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"millrace up: {len(services)} services from {deployment_path}"]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  " + "  ".join([*cells, row[3]]))
    for stream in sorted(deployment.external_sinks & set(deployment.sinks)):
        lines.append(f"  sink {stream} -> {deployment.sinks[stream]} (external: not run here)")
    lines.append(f"  data dir: {data_dir}")
    lines.append(f"  log dir:  {log_dir}")
    lines.append("millrace up: running (Ctrl-C to stop)")
    _say("\n".join(lines))


def _metrics_url(service: _Service, ready_line: str | None) -> str:
    """The Prometheus URL of a service: the port its ready line names, else the configured one."""
    port = service.metrics_port
    match = _METRICS_IN_READY_LINE.search(ready_line or "")
    if match:
        port = int(match.group(1))
    if port is None:
        return "-"
    return f"http://127.0.0.1:{port}/metrics"
