"""``--config`` (alias ``--deployment``, env ``MILLRACE_CONFIG``) and how
``millrace node --computation C --interval I`` finds the placement it runs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.cli import build_parser, main
from millrace.commands._grpc_errors import CommandError
from millrace.commands._options import CONFIG_ENV
from millrace.commands.node import resolve_node
from millrace.computations._topology import Topology
from millrace.deployment import Deployment
from tests.support import ROOT, free_port

# Each sub-command that reads a configuration file, with its other required arguments.
REQUIRED = {
    "check": [],
    "deadletters": [],
    "injector": [],
    "node": ["--name", "n"],
    "sink": ["--stream", "s"],
    "state get": ["--computation", "c", "--key", "k"],
    "status": [],
    "up": [],
    "view get": ["--stream", "s", "--key", "k"],
}
OPTIONAL = {
    "finish": ["--stream", "s"],
    "health": [],
    "inject": ["--stream", "s"],
    "intervals list": [],
    "intervals move": ["--computation", "c", "--interval", "0", "--to", "n"],
    "intervals split": ["--computation", "c", "--interval", "0"],
    "intervals merge": ["--computation", "c", "--interval", "2"],
    "nodes list": [],
    "nodes drain": ["n"],
    "nodes resume": ["n"],
    "security init": [],
    "watermarks": [],
}


@pytest.fixture(autouse=True)
def no_config_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)


def parse(command: str, *args: str) -> argparse.Namespace:
    return build_parser().parse_args([*command.split(), *args])


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_config_deployment_and_environment_are_the_same_setting(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = REQUIRED[command]
    assert parse(command, "--config", "a.toml", *rest).deployment == "a.toml"
    assert parse(command, "--deployment", "a.toml", *rest).deployment == "a.toml"
    with pytest.raises(SystemExit):
        parse(command, *rest)
    assert "--config" in capsys.readouterr().err
    monkeypatch.setenv(CONFIG_ENV, "env.toml")
    assert parse(command, *rest).deployment == "env.toml"
    assert parse(command, "--config", "a.toml", *rest).deployment == "a.toml"


@pytest.mark.parametrize("command", sorted(OPTIONAL))
def test_optional_config_ignores_the_environment(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = OPTIONAL[command]
    assert parse(command, "--config", "a.toml", *rest).deployment == "a.toml"
    assert parse(command, "--deployment", "a.toml", *rest).deployment == "a.toml"
    monkeypatch.setenv(CONFIG_ENV, "env.toml")
    assert parse(command, *rest).deployment is None


def subparsers(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield f"{prefix}{name}", child
                yield from subparsers(child, f"{prefix}{name} ")


def test_every_command_that_reads_a_configuration_offers_config() -> None:
    found = {}
    for name, parser in subparsers(build_parser()):
        options = {o: a for a in parser._actions for o in a.option_strings}
        if "--deployment" in options:
            assert "--config" in options, f"millrace {name} has --deployment but no --config"
            assert options["--config"] is options["--deployment"], name
            found[name] = options["--config"].help
    assert set(found) == set(REQUIRED) | set(OPTIONAL)
    assert all(CONFIG_ENV in found[name] for name in REQUIRED)


def test_the_three_spellings_fail_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "missing.toml")
    errors = []
    for args in (["--config", missing], ["--deployment", missing], []):
        if not args:
            monkeypatch.setenv(CONFIG_ENV, missing)
        assert main(["status", *args]) == 2
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1] == errors[2]
    assert "no such file (check --config)" in errors[0]


# -- millrace node --computation C --interval I ------------------------------------------


def deployment(nodes: dict[str, dict[str, Any]], *, intervals: int = 2) -> Deployment:
    topology = Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}, "other_out": {}},
            "computations": {
                "c": {
                    "handler": "tests.workloads:Poison",
                    "intervals": intervals,
                    "inputs": {"in": "key"},
                    "outputs": ["out"],
                },
                "d": {
                    "handler": "tests.workloads:Poison",
                    "inputs": {"in": "key"},
                    "outputs": ["other_out"],
                },
            },
        }
    )
    raw = {
        "nodes": {**nodes, "d-node": {"computation": "d", "intervals": [0], "address": "h:9"}},
        "sinks": {"out": {"address": "h:20"}, "other_out": {"address": "h:21"}},
    }
    return Deployment.from_dict(topology, raw)


def error_of(placed: Deployment, **kwargs: Any) -> str:
    with pytest.raises(CommandError) as caught:
        resolve_node(placed, config="d.toml", **kwargs)
    return caught.value.message


def test_the_placement_hosting_exactly_the_intervals_is_used() -> None:
    placed = deployment(
        {
            "c-a": {"computation": "c", "intervals": [0], "address": "h:1"},
            "c-b": {"computation": "c", "intervals": [1], "address": "h:2", "epoch": 4},
        }
    )
    resolved = resolve_node(placed, computation="c", intervals=[1])
    assert (resolved.name, resolved.listen) == ("c-b", "h:2")
    assert resolved.deployment.nodes == placed.nodes
    assert resolve_node(placed, name="c-b") == resolved


def test_interval_order_and_repeats_do_not_matter() -> None:
    placed = deployment({"c-all": {"computation": "c", "intervals": [1, 0], "address": "h:1"}})
    assert resolve_node(placed, computation="c", intervals=[0, 1, 0]).name == "c-all"


def test_unknown_names_and_intervals_say_what_exists() -> None:
    placed = deployment({"c-all": {"computation": "c", "intervals": [0, 1], "address": "h:1"}})
    assert "no computation 'x' in d.toml (computations: c, d)" in error_of(
        placed, computation="x", intervals=[0]
    )
    message = error_of(placed, computation="c", intervals=[0, 2, -1])
    assert "'c' has 2 intervals (0..1); no interval -1, 2" in message
    assert "needs --interval" in error_of(placed, computation="c")
    assert "no node 'nope' in d.toml (known: c-all, d-node)" in error_of(placed, name="nope")
    assert "not both" in error_of(placed, name="c-all", intervals=[0])
    assert "pass --name NAME or --computation" in error_of(placed)


def test_part_of_a_placement_is_refused_naming_it() -> None:
    placed = deployment({"c-all": {"computation": "c", "intervals": [0, 1], "address": "h:1"}})
    message = error_of(placed, computation="c", intervals=[0])
    assert "c-all hosts [0, 1] at h:1" in message
    assert "--name c-all (--interval 0 --interval 1)" in message


def test_intervals_spread_over_addresses_are_refused() -> None:
    placed = deployment(
        {
            "c-a": {"computation": "c", "intervals": [0], "address": "h:1"},
            "c-b": {"computation": "c", "intervals": [1], "address": "h:2"},
        }
    )
    message = error_of(placed, computation="c", intervals=[0, 1], address="h:1")
    assert "c-a hosts [0] at h:1, c-b hosts [1] at h:2" in message


def test_an_ad_hoc_node_takes_over_placements_sharing_its_address() -> None:
    placed = deployment(
        {
            "c-a": {"computation": "c", "intervals": [0], "address": "h:1", "epoch": 2},
            "c-b": {"computation": "c", "intervals": [1], "address": "h:1", "epoch": 5},
        }
    )
    assert "pass --address" in error_of(placed, computation="c", intervals=[0, 1])
    resolved = resolve_node(placed, computation="c", intervals=[0, 1], address="h:1")
    assert resolved.name == "c-0-1"
    nodes = resolved.deployment.nodes
    assert set(nodes) == {"c-0-1", "d-node"}
    assert nodes["c-0-1"].intervals == (0, 1) and nodes["c-0-1"].epoch == 5
    assert [resolved.deployment.address_of("c", i) for i in (0, 1)] == ["h:1", "h:1"]
    assert resolved.deployment.address_of("d", 0) == "h:9"


def test_address_must_be_where_the_configuration_routes() -> None:
    placed = deployment({"c-all": {"computation": "c", "intervals": [0, 1], "address": "h:71"}})
    message = error_of(placed, computation="c", intervals=[0, 1], address="h:72")
    assert "--address h:72 is not where d.toml routes 'c' intervals [0, 1] (h:71)" in message
    for wildcard in ("0.0.0.0:71", "[::]:71"):
        resolved = resolve_node(placed, name="c-all", address=wildcard)
        assert resolved.listen == wildcard
        assert resolved.deployment.nodes["c-all"].address == "h:71"
    assert "--address" in error_of(placed, name="c-all", address="0.0.0.0:72")


def test_metrics_port_overrides_only_the_node_run() -> None:
    placed = deployment(
        {"c-all": {"computation": "c", "intervals": [0, 1], "address": "h:1", "metrics_port": 5}}
    )
    resolved = resolve_node(placed, computation="c", intervals=[0, 1], metrics_port=0)
    assert resolved.deployment.nodes["c-all"].metrics_port == 0
    assert placed.nodes["c-all"].metrics_port == 5
    assert resolved.deployment.nodes["d-node"] == placed.nodes["d-node"]


@pytest.mark.slow
def test_a_node_process_starts_by_computation_and_interval(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "topology.toml").write_text(
        '[streams.in]\n[streams.out]\n[computations.c]\nhandler = "tests.workloads:Poison"\n'
        'intervals = 2\ninputs = { in = "key" }\noutputs = ["out"]\n'
    )
    (tmp_path / "config.toml").write_text(
        f'topology = "topology.toml"\n[nodes.c-all]\ncomputation = "c"\nintervals = [0, 1]\n'
        f'address = "127.0.0.1:{port}"\n[sinks.out]\naddress = "127.0.0.1:{free_port()}"\n'
        "[security]\ninsecure = true\n"  # it binds 0.0.0.0 below: open on purpose
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MILLRACE_LOG_LEVEL": "WARNING",
        CONFIG_ENV: str(tmp_path / "config.toml"),
    }
    millrace = [sys.executable, "-m", "millrace", "node", "--data-dir", str(tmp_path / "data")]
    refused = subprocess.run(
        [*millrace, "--computation", "c", "--interval", "1"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "c-all hosts [0, 1]" in refused.stderr and "Traceback" not in refused.stderr
    process = subprocess.Popen(
        [*millrace, "--computation", "c", "--interval", "0", "--interval", "1",
         "--address", f"0.0.0.0:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        ready = f"node c-all serving c intervals [0, 1] on 0.0.0.0:{port}"
        died = process.stderr.read() if not line and process.stderr else ""  # EOF: it exited
        assert line.startswith(ready), line + died
    finally:
        process.terminate()
        process.wait(30)
    assert process.returncode == 0
