"""Where things run: nodes, the key intervals they host, sinks, the watermark authority.

A deployment file (TOML) names a topology and places it::

    topology = "topology.toml"          # relative to this file
    authority = "127.0.0.1:7000"        # watermark authority (default: the injector)

    [injector]
    address = "127.0.0.1:7000"
    out_of_orderness_ms = 5000          # source watermark = max event time - this
    idle_timeout_ms = 10000             # then event time follows processing time
    metrics_port = 9100                 # Prometheus endpoint (optional)
    file_sources = { events = "incoming/" }   # tail *.jsonl files into a source stream
    segment_bytes = 67108864            # roll a log segment at this size
    segment_ms = 600000                 # ... or at this age
    retention_ms = 604800000            # delete acked sealed segments older than this
    archive_uri = "s3://bucket/millrace/log"   # copy sealed segments here (optional)
    archive_retention_ms = 31536000000  # the archive's own retention (default: forever)

    [nodes.counts-a]
    computation = "counts"
    intervals = [0, 1]
    address = "127.0.0.1:7101"
    epoch = 1                           # the assignment's epoch (default 1)
    metrics_port = 9101                 # Prometheus endpoint (optional)

    [sinks.window_totals]               # a sink stream and who receives it
    address = "127.0.0.1:7300"
    path = "out/window_totals.jsonl"    # for `millrace sink`: the exactly-once file
    format = "jsonl"                    # or "parquet": `path` is then a directory of part files
    dedup_retention_ms = 3600000        # how long its index keeps record ids at least

    [security]                          # optional: TLS/mTLS and a shared token
    token = "s3cret"                    # (see deployment.security; env MILLRACE_TOKEN ...)
    tls_cert = "certs/node.pem"
    tls_key = "certs/node.key"
    tls_ca = "certs/ca.pem"
    require_client_cert = true

Every interval of every computation must be hosted exactly once and every
sink stream must have an address; :meth:`Deployment.load` says which is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millrace.deployment._placement import (
    DeploymentError,
    Placement,
    placement_settings,
    read_deployment_file,
    topology_file,
)
from millrace.deployment.security import Security

if TYPE_CHECKING:
    from millrace.computations import IntervalId, Topology


@dataclass(frozen=True, kw_only=True)
class Deployment(Placement):
    """A topology placed on nodes."""

    topology: Topology

    @classmethod
    def load(cls, path: str | Path) -> Deployment:
        """Read and validate a deployment file and its topology (a problem of the
        topology is raised as one of the deployment, naming the topology file)."""
        # Imported here, not above: a Placement (what clients read) must not pay for
        # the user API and, through the handlers, the user's code.
        from millrace.computations import Topology, TopologyError

        path = Path(path)
        raw, security = read_deployment_file(path)
        named = topology_file(path, raw)
        if named is None:
            raise DeploymentError([f"{path}: 'topology' must name the topology file"])
        try:
            topology = Topology.load(named)
        except TopologyError as exc:
            raise DeploymentError([f"{raw['topology']}: {p}" for p in exc.problems]) from None
        return cls.from_dict(topology, raw, security=security, topology_file=named)

    @classmethod
    def from_dict(
        cls,
        topology: Topology,
        raw: Mapping[str, Any],
        *,
        security: Security | None = None,
        topology_file: Path | None = None,
    ) -> Deployment:
        """Validate a deployment given as plain data.

        ``security`` wins; otherwise a ``security`` table in ``raw`` is read (paths
        relative to the working directory) with the environment's overrides.
        """
        if security is None:
            security = Security.from_settings(raw.get("security", {}), Path("."))
        deployment = cls(
            topology=topology, topology_file=topology_file, **placement_settings(raw, security)
        )
        problems = deployment._problems()
        if problems:
            raise DeploymentError(problems)
        return deployment

    def _problems(self) -> list[str]:
        from millrace.computations import IntervalId  # here, not above: see load

        problems: list[str] = []
        hosted: dict[IntervalId, str] = {}
        for node in self.nodes.values():
            spec = self.topology.computations.get(node.computation)
            if spec is None:
                problems.append(
                    f"node {node.name!r} hosts unknown computation {node.computation!r}"
                )
                continue
            for index in node.intervals:
                if not 0 <= index < spec.intervals:
                    problems.append(
                        f"node {node.name!r}: {node.computation!r} has no interval {index}"
                    )
                elif IntervalId(node.computation, index) in hosted:
                    other = hosted[IntervalId(node.computation, index)]
                    where = f"on {other!r} and {node.name!r}"
                    problems.append(f"interval {index} of {node.computation!r} is {where}")
                else:
                    hosted[IntervalId(node.computation, index)] = node.name
        for name, spec in self.topology.computations.items():
            for index in range(spec.intervals):
                if IntervalId(name, index) not in hosted:
                    problems.append(f"interval {index} of {name!r} is hosted by no node")
        sources = set(self.topology.sources())
        for stream in self.injector.idle_excluded if self.injector else ():
            if stream not in sources:
                problems.append(
                    f"[injector] idle_excluded: {stream!r} is not a source stream of the topology"
                )
        for stream in self.injector.file_sources if self.injector else {}:
            if stream not in sources:
                problems.append(f"file source {stream!r} is not a source stream of the topology")
        for stream in self.topology.sinks():
            if stream not in self.sinks:
                problems.append(f"sink stream {stream!r} has no [sinks.{stream}] address")
        return problems

    def address_of(self, consumer: str, interval: int) -> str:
        """The address that receives deliveries for ``consumer``'s ``interval`` (or a sink)."""
        from millrace.computations import IntervalId  # here, not above: see load

        key = IntervalId(consumer, interval)
        address = self._node_addresses.get(key) or self._sink_addresses.get(consumer)
        if address is None:
            raise KeyError(f"no node hosts interval {interval} of {consumer!r}")
        return address

    @cached_property
    def _sink_addresses(self) -> dict[str, str]:
        """Consumer name of a sink stream (``sink:STREAM``) -> the sink's address."""
        from millrace.engine import SINK_PREFIX  # here, not above: see load

        return {SINK_PREFIX + stream: address for stream, address in self.sinks.items()}

    @cached_property
    def _node_addresses(self) -> dict[IntervalId, str]:
        """(computation, interval) -> its node's address, the first node listed winning
        (routing asks for every production)."""
        from millrace.computations import IntervalId  # here, not above: see load

        addresses: dict[IntervalId, str] = {}
        for node in self.nodes.values():
            for interval in node.intervals:
                addresses.setdefault(IntervalId(node.computation, interval), node.address)
        return addresses
