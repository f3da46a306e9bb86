"""The operator commands' test deployment, and running a command in-process."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from millrace.commands import deadletters, inject, state, status, watermarks

TOPOLOGY = """
[streams.events]
[streams.ok]
[computations.count]
handler = "tests.workloads:Poison"
intervals = 2
inputs = { events = "key" }
outputs = ["ok"]
max_attempts = 2
"""


def write_deployment(directory: Path, injector: str, node: str, sink: str) -> Path:
    """A deployment of the Poison topology: an injector, node ``p`` (both intervals), a sink."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "topology.toml").write_text(TOPOLOGY)
    deployment = directory / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "{injector}"
out_of_orderness_ms = 1000
idle_timeout_ms = 1000
[nodes.p]
computation = "count"
intervals = [0, 1]
address = "{node}"
[sinks.ok]
address = "{sink}"
"""
    )
    return deployment


def build_parser() -> argparse.ArgumentParser:
    """``millrace`` with the operator commands only."""
    parser = argparse.ArgumentParser(prog="millrace")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (inject, watermarks, status, state, deadletters):
        module.register(subparsers)
    return parser


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``millrace ARGV`` in this process: exit code, stdout, stderr."""
    args = build_parser().parse_args(list(argv))
    code: int = args.handler(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err
