"""Metrics endpoints listen on the service's host, not on every interface (issue 15, defect 6).

A node and the injector on 127.0.0.1 serve Prometheus metrics on 127.0.0.1 only
(read from the kernel's socket table, /proc/net/tcp): nobody beyond the machine
can scrape them unless the service itself listens on every interface.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import InjectorProcess, NodeProcess, free_port

pytestmark = pytest.mark.slow

LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
LISTEN = "0A"


def listening_hosts(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp has them) listening on ``port``."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                host, _, hex_port = fields[1].partition(":")
                if int(hex_port, 16) == port and fields[3] == LISTEN:
                    hosts.add(host)
    return hosts


def test_metrics_listen_on_the_services_host_only(tmp_path: Path) -> None:
    ports = {name: free_port() for name in ("injector", "im", "node", "nm")}
    (tmp_path / "topology.toml").write_text(
        """
[streams.in]
[streams.ok]
[computations.fwd]
handler = "tests.workloads:Poison"
inputs = { in = "key" }
outputs = ["ok"]
"""
    )
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
metrics_port = {ports["im"]}
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{ports["node"]}"
metrics_port = {ports["nm"]}
[sinks.ok]
address = "127.0.0.1:{free_port()}"
"""
    )
    injector = InjectorProcess(deployment, tmp_path / "log", tmp_path / "injector.log")
    injector.start()
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    try:
        node.start()
        for port in (ports["im"], ports["nm"]):
            assert listening_hosts(port) == {LOOPBACK}, f"metrics port {port}"
    finally:
        node.terminate()
        injector.terminate()
