"""``millrace injector``: run the injector until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import os
import sys

from millrace.commands._options import add_config_argument
from millrace.deployment import (
    HANDOFF_SWITCH_INTERVAL_S,
    Deployment,
    StopSignals,
    configure_logging,
    enable_stack_dumps,
    settle_garbage_collector,
    tune_threads,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``injector`` sub-command."""
    parser = subparsers.add_parser(
        "injector",
        help="run the injector (ingest API, durable log, forwarding, watermark authority)",
        description="Run the [injector] of a deployment file until SIGTERM/SIGINT.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--log-dir",
        default=os.environ.get("MILLRACE_LOG_DIR", "data/log"),
        help="where the durable log lives (env MILLRACE_LOG_DIR; default: data/log)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Start the injector, print where it listens, serve until signalled, drain, exit 0."""
    from millrace.injector.archive import ArchiveError
    from millrace.injector.authority_journal import JournalError
    from millrace.injector.log import LogConfig, LogError
    from millrace.injector.server import Injector, InjectorConfig

    tune_threads(HANDOFF_SWITCH_INTERVAL_S)
    configure_logging()
    enable_stack_dumps()
    signals = StopSignals()  # before the ready line: a SIGTERM right after it drains
    deployment = Deployment.load(args.deployment)
    placement = deployment.injector
    if placement is None:
        print(f"millrace injector: {args.deployment} has no [injector] section", file=sys.stderr)
        return 2
    config = InjectorConfig(
        out_of_orderness_ms=placement.out_of_orderness_ms,
        idle_timeout_ms=placement.idle_timeout_ms,
        log=LogConfig(segment_bytes=placement.segment_bytes, segment_ms=placement.segment_ms),
        retention_ms=placement.retention_ms,
        archive_uri=placement.archive_uri,
        archive_retention_ms=placement.archive_retention_ms,
        idle_excluded=frozenset(placement.idle_excluded),
    )
    injector = Injector(
        deployment,
        args.log_dir,
        address=placement.address,
        config=config,
        metrics_port=placement.metrics_port,
    )
    try:
        injector.start()
    except (LogError, OSError, JournalError, ArchiveError) as exc:
        print(f"millrace injector: cannot start: {exc}", file=sys.stderr)
        return 2
    settle_garbage_collector()
    metrics = f", metrics on :{injector.metrics_port}" if injector.metrics_port else ""
    streams = ", ".join(sorted(injector.streams))
    print(f"injector serving [{streams}] on {placement.address}{metrics}", flush=True)
    signals.wait()
    injector.stop()
    return 0
