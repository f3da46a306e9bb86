"""Every server speaks standard gRPC health and reflection, and the deploy files agree.

1. deploy/compose.yaml runs every service of deploy/compose-deployment.toml
   (injector, each node, each sink) with the right command, health-check
   address and published ports, and its Prometheus service mounts a config
   that scrapes exactly the deployment's metrics endpoints (``promtool``
   accepts it).
2. ``millrace health`` against real ``millrace injector``, ``node`` and
   ``sink`` processes of a deployment with a token: SERVING without the
   token; server reflection lists each server's services; a closed port
   fails with the address in the message.
3. ``millrace health`` honours TLS settings (environment or ``--deployment``)
   against an in-process mTLS injector; usage errors exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from millrace import cli
from millrace.computations import Topology
from millrace.deployment import Deployment
from millrace.deployment.security import Security
from millrace.injector.server import Injector
from tests.support import ROOT, InjectorProcess, NodeProcess, free_port, stop_gracefully
from tests.test_prometheus import require
from tests.test_security import certs, secured_injector  # noqa: F401 - fixtures

DEPLOY = ROOT / "deploy"
CONFIG_DIR = PurePosixPath("/config")
PROMETHEUS_CONFIG = PurePosixPath("/etc/prometheus/prometheus.yml")
"""Where the prom/prometheus image reads its config (its default ``--config.file``)."""
HEALTH_ENV = "MILLRACE_HEALTH_ADDRESS"
STANDARD_SERVICES = {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}


# -- deploy/compose.yaml ---------------------------------------------------------------


def compose() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return services


def mounts(service: dict[str, Any]) -> dict[PurePosixPath, Path]:
    """Container path -> host path (relative to deploy/) of a service's bind mounts."""
    found: dict[PurePosixPath, Path] = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            found[PurePosixPath(target)] = (DEPLOY / source).resolve()
    return found


def compose_deployment(services: dict[str, Any]) -> Deployment:
    """The deployment as the containers see it: the mounted deployment and topology files."""
    injector = mounts(services["injector"])
    assert injector[CONFIG_DIR / "deployment.toml"] == DEPLOY / "compose-deployment.toml"
    raw = tomllib.loads((DEPLOY / "compose-deployment.toml").read_text())
    topology = injector[CONFIG_DIR / raw["topology"]]
    return Deployment.from_dict(Topology.load(topology), raw, security=Security())


def split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def test_compose_runs_every_service_of_the_deployment() -> None:
    services = compose()
    deployment = compose_deployment(services)
    assert deployment.injector is not None
    config_args = ["--deployment", str(CONFIG_DIR / "deployment.toml")]
    # service name -> (command prefix, gRPC address, metrics port)
    expected: dict[str, tuple[list[str], str, int | None]] = {}
    host, _ = split(deployment.injector.address)
    expected[host] = (
        ["injector", *config_args],
        deployment.injector.address,
        deployment.injector.metrics_port,
    )
    for name, node in deployment.nodes.items():
        host, _ = split(node.address)
        assert host == name, f"[nodes.{name}] address should be the compose service {name}"
        expected[host] = (["node", *config_args, "--name", name], node.address, node.metrics_port)
    for stream, address in deployment.sinks.items():
        host, _ = split(address)
        expected[host] = (["sink", *config_args, "--stream", stream], address, None)

    millrace_services = {name for name, body in services.items() if body["image"] == "millrace"}
    assert millrace_services == set(expected), "compose and the deployment name other services"
    for name, (command, address, metrics_port) in expected.items():
        service = services[name]
        assert service["command"][: len(command)] == command, name
        # The image's HEALTHCHECK (`millrace health`) probes this service's own gRPC address.
        assert service["environment"][HEALTH_ENV] == address, name
        service_mounts = mounts(service)
        for file in ("deployment.toml", "topology.toml"):
            assert service_mounts[CONFIG_DIR / file].is_file(), f"{name}: /config/{file}"
        published = {int(str(p).split(":")[-1]) for p in service.get("ports", [])}
        assert published <= {split(address)[1], metrics_port}, f"{name} publishes {published}"
    injector_host, injector_port = split(deployment.injector.address)
    assert injector_port in {int(str(p).split(":")[-1]) for p in services[injector_host]["ports"]}


def test_compose_prometheus_scrapes_exactly_the_deployments_metrics_ports() -> None:
    services = compose()
    deployment = compose_deployment(services)
    assert deployment.injector is not None
    prometheus = mounts(services["prometheus"])
    config_path = prometheus[PROMETHEUS_CONFIG]
    assert config_path == DEPLOY / "prometheus" / "prometheus-compose.yml"
    config = yaml.safe_load(config_path.read_text())
    for rule_file in config["rule_files"]:
        mounted = prometheus.get(PROMETHEUS_CONFIG.parent / rule_file)
        assert mounted is not None and mounted.is_file(), f"rule file {rule_file} not mounted"

    targets: dict[str, set[str]] = {}
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            targets.setdefault(job["job_name"], set()).update(static["targets"])
    injector_host, _ = split(deployment.injector.address)
    assert targets == {
        # alerts.yml's InjectorDown and NodeDown rely on these two job names.
        "millrace-injector": {f"{injector_host}:{deployment.injector.metrics_port}"},
        "millrace-nodes": {
            f"{name}:{node.metrics_port}"
            for name, node in deployment.nodes.items()
            if node.metrics_port is not None
        },
    }


@pytest.mark.slow
def test_compose_prometheus_config_passes_promtool() -> None:
    promtool = require("promtool")
    result = subprocess.run(
        [promtool, "check", "config", "prometheus-compose.yml"],
        cwd=DEPLOY / "prometheus", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


# -- real processes --------------------------------------------------------------------

TOKEN = "health-needs-no-token"
TOPOLOGY = """
[streams.events]
[streams.ok]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
"""


@dataclass(frozen=True)
class Server:
    name: str
    address: str
    services: frozenset[str]
    """The Millrace services it serves (health and reflection come on top)."""


def wire(*names: str) -> frozenset[str]:
    return frozenset(f"millrace.wire.v1.{name}" for name in names)


def without_security_env() -> dict[str, str]:
    """This environment minus every Millrace security and health-address setting."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MILLRACE_TOKEN", "MILLRACE_TLS_", HEALTH_ENV))
    }


def health(*args: str) -> subprocess.CompletedProcess[str]:
    """``millrace health ARGS`` as a process, without a token or TLS settings."""
    return subprocess.run(
        [sys.executable, "-m", "millrace", "health", *args],
        capture_output=True, text=True, cwd=ROOT, env=without_security_env(),
        timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    """``millrace injector``, ``node`` and ``sink`` of a deployment with a token."""
    work = tmp_path_factory.mktemp("cluster")
    (work / "topology.toml").write_text(TOPOLOGY)
    injector_address, node_address, sink_address = (f"127.0.0.1:{free_port()}" for _ in range(3))
    deployment = work / "deployment.toml"
    deployment.write_text(
        f'topology = "topology.toml"\n'
        f'[injector]\naddress = "{injector_address}"\n'
        f'[nodes.count]\ncomputation = "count"\nintervals = [0]\naddress = "{node_address}"\n'
        f'[sinks.ok]\naddress = "{sink_address}"\n'
        f'[security]\ntoken = "{TOKEN}"\n'
    )
    injector = InjectorProcess(deployment, work / "log", work / "injector.log")
    node = NodeProcess(deployment, "count", work / "node", work)
    sink_log = work / "sink.log"
    sink: subprocess.Popen[str] | None = None
    try:
        injector.start()
        with open(sink_log, "w") as log:
            sink = subprocess.Popen(
                [sys.executable, "-m", "millrace", "sink", "--deployment", str(deployment),
                 "--stream", "ok", "--path", str(work / "ok.jsonl")],
                stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT,
            )  # fmt: skip
        assert sink.stdout is not None
        line = sink.stdout.readline()
        assert line.startswith("sink ok serving"), f"{line!r}; see {sink_log}"
        node.start()
        yield [
            Server("injector", injector_address, wire("Ingest", "WatermarkAuthority", "Control")),
            Server("node", node_address, wire("Delivery", "Admin")),
            Server("sink", sink_address, wire("Delivery", "Subscribe", "View")),
        ]
    finally:
        node.terminate()
        if sink is not None:
            stop_gracefully(sink, sink_log)
        injector.terminate()


@pytest.mark.slow
def test_health_command_says_serving_without_the_token(servers: list[Server]) -> None:
    for server in servers:
        result = health("--address", server.address)
        assert (result.returncode, result.stdout) == (0, "SERVING\n"), (server, result.stderr)


@pytest.mark.slow
def test_health_command_checks_each_service(
    servers: list[Server], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MILLRACE_TOKEN", raising=False)
    for server in servers:
        for service in sorted(server.services):
            assert cli.main(["health", "--address", server.address, "--service", service]) == 0
            assert capsys.readouterr().out == "SERVING\n"
        code = cli.main(["health", "--address", server.address, "--service", "no.Such"])
        err = capsys.readouterr().err
        assert code == 1
        assert err.startswith(f"millrace health: unknown service no.Such at {server.address} (")
        assert err.count("\n") == 1


@pytest.mark.slow
def test_reflection_lists_each_servers_services_without_the_token(
    servers: list[Server],
) -> None:
    for server in servers:
        with grpc.insecure_channel(server.address) as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            listed = set(database.get_services())
            assert listed == server.services | STANDARD_SERVICES, server.name
            pool = DescriptorPool(database)
            for name in server.services:  # each service's .proto is served, not just its name
                assert pool.FindServiceByName(name).methods, f"{server.name}: {name}"


@pytest.mark.slow
def test_health_command_against_a_closed_port_names_the_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    result = health("--address", address)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"millrace health: cannot reach {address} (UNAVAILABLE")
    assert "(from --address)" in result.stderr and result.stderr.count("\n") == 1


# -- in-process: addresses, usage, TLS -------------------------------------------------


def test_health_address_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv(HEALTH_ENV, address)
    assert cli.main(["health", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach {address} " in err and f"(from {HEALTH_ENV})" in err


def test_health_usage_errors_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["health", "--address", "no-port"]) == 2
    assert "'no-port' (from --address) is not HOST:PORT" in capsys.readouterr().err
    assert cli.main(["health", "--deployment", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    monkeypatch.setenv("MILLRACE_TLS_CA", str(tmp_path / "missing-ca.pem"))
    assert cli.main(["health", "--address", f"127.0.0.1:{free_port()}"]) == 2
    assert "cannot read a TLS file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        cli.main(["health", "--timeout", "0"])
    assert caught.value.code == 2


def test_health_command_uses_tls_from_the_environment_or_the_deployment(
    secured_injector: Injector,  # noqa: F811 - the fixture imported above
    certs: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = secured_injector.address
    # Plaintext against an mTLS server: unreachable, and the message says what to check.
    assert cli.main(["health", "--address", address]) == 1
    assert "a TLS server needs MILLRACE_TLS_CA" in capsys.readouterr().err
    # The deployment's [security] (the token is not needed, TLS is).
    deployment = str(tmp_path / "deployment.toml")
    assert cli.main(["health", "--deployment", deployment, "--address", address]) == 0
    assert capsys.readouterr().out == "SERVING\n"
    # The environment, as in a container: the CA and a client certificate.
    monkeypatch.setenv("MILLRACE_TLS_CA", str(certs / "ca.pem"))
    monkeypatch.setenv("MILLRACE_TLS_CERT", str(certs / "client.pem"))
    monkeypatch.setenv("MILLRACE_TLS_KEY", str(certs / "client.key"))
    monkeypatch.setenv(HEALTH_ENV, address)
    assert cli.main(["health"]) == 0
    assert capsys.readouterr().out == "SERVING\n"


def test_compose_grafana_loads_the_dashboard_from_prometheus() -> None:
    services = compose()
    grafana = mounts(services["grafana"])
    provisioning = grafana[PurePosixPath("/etc/grafana/provisioning")]
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    prometheus_port = {int(str(p).split(":")[-1]) for p in services["prometheus"]["ports"]}
    assert (
        source["type"] == "prometheus"
        and source["url"] == f"http://prometheus:{min(prometheus_port)}"
    )
    [provider] = yaml.safe_load((provisioning / "dashboards" / "millrace.yml").read_text())[
        "providers"
    ]
    folder = PurePosixPath(provider["options"]["path"])
    dashboard = grafana[folder / "millrace.json"]
    assert dashboard == DEPLOY / "grafana" / "millrace.json"
    assert "prometheus" in services["grafana"]["depends_on"]
