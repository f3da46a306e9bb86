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

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from computations import Topology
from computations.errors import TopologyError
from deployment.security import Security
from engine import SINK_PREFIX

ENV_PREFIX = "MILLRACE__"
SINK_FORMATS = ("jsonl", "parquet")
"""The output formats of ``millrace sink`` (``format`` in ``[sinks.STREAM]``)."""


def apply_environment(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    """Override deployment settings from the environment, in place.

    ``MILLRACE__INJECTOR__OUT_OF_ORDERNESS_MS=2000`` sets ``[injector]
    out_of_orderness_ms``; ``MILLRACE__NODES__COUNTS_A__METRICS_PORT=9101`` sets
    ``[nodes.counts-a] metrics_port`` (names match case-insensitively, ``_``
    standing for ``-``). Values are read as TOML (numbers, booleans, arrays),
    else as plain strings.
    """
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        *tables, key = name[len(ENV_PREFIX) :].split("__")
        node: dict[str, Any] = raw
        for part in tables:
            node = node.setdefault(_match(node, part), {})
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        node[_match(node, key)] = value


def _match(table: Mapping[str, Any], part: str) -> str:
    wanted = part.lower().replace("-", "_")
    for existing in table:
        if existing.lower().replace("-", "_") == wanted:
            return existing
    return part.lower()


@dataclass(frozen=True, kw_only=True)
class NodePlacement:
    """One node process: a computation's intervals, its address and epoch."""

    name: str
    computation: str
    intervals: tuple[int, ...]
    address: str
    epoch: int = 1
    metrics_port: int | None = None
    dedup_retention_ms: int | None = None
    """How long its stores keep record ids at least (None: the store's default)."""


@dataclass(frozen=True, kw_only=True)
class InjectorPlacement:
    """Where the injector listens and how it computes source watermarks."""

    address: str
    out_of_orderness_ms: int = 5_000
    idle_timeout_ms: int = 10_000
    metrics_port: int | None = None
    file_sources: Mapping[str, str] = field(default_factory=dict)
    """Source stream -> directory of JSON-lines files to tail."""
    segment_bytes: int = 64 << 20
    segment_ms: int = 10 * 60_000
    retention_ms: int | None = None
    """Delete sealed log segments older than this once every consumer acked them (None: keep)."""
    archive_uri: str | None = None
    """Copy every sealed segment here (``file://``, ``s3://``, ...; None: no archive)."""
    archive_retention_ms: int | None = None
    """Delete archived segments older than this (None: keep them forever)."""


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """A topology placed on nodes."""

    topology: Topology
    nodes: Mapping[str, NodePlacement]
    sinks: Mapping[str, str]
    sink_paths: Mapping[str, str] = field(default_factory=dict)
    """Sink stream -> output of ``millrace sink`` (when set): a JSON-lines file, or the
    directory of Parquet part files when its format is ``"parquet"``."""
    sink_formats: Mapping[str, str] = field(default_factory=dict)
    """Sink stream -> output format of ``millrace sink`` (one of :data:`SINK_FORMATS`);
    a stream not listed is written as ``"jsonl"`` (see :meth:`sink_format`)."""
    sink_dedup_retention_ms: Mapping[str, int] = field(default_factory=dict)
    """Sink stream -> how long its index keeps record ids at least (when set; else the
    store's default, an hour)."""
    authority: str | None = None
    injector: InjectorPlacement | None = None
    security: Security = field(default_factory=Security)
    """TLS material and the shared token of every process of the deployment."""

    @classmethod
    def load(cls, path: str | Path) -> Deployment:
        """Read and validate a deployment file."""
        path = Path(path)
        with open(path, "rb") as handle:
            raw = tomllib.load(handle)
        apply_environment(raw, os.environ)
        topology_path = raw.get("topology")
        if not isinstance(topology_path, str):
            raise TopologyError([f"{path}: 'topology' must name the topology file"])
        topology = Topology.load(path.parent / topology_path)
        for body in raw.get("sinks", {}).values():
            if isinstance(body, dict) and "path" in body:
                body["path"] = str(path.parent / body["path"])
        injector = raw.get("injector")
        if isinstance(injector, dict) and "file_sources" in injector:
            injector["file_sources"] = {
                stream: str(path.parent / directory)
                for stream, directory in injector["file_sources"].items()
            }
        section = raw.get("security", {})
        if not isinstance(section, dict):
            raise TopologyError([f"{path}: [security] must be a table"])
        try:
            security = Security.from_settings(section, path.parent)
        except ValueError as exc:
            raise TopologyError([f"{path}: {exc}"]) from None
        return cls.from_dict(topology, raw, security=security)

    @classmethod
    def from_dict(
        cls, topology: Topology, raw: Mapping[str, Any], *, security: Security | None = None
    ) -> Deployment:
        """Validate a deployment given as plain data.

        ``security`` wins; otherwise a ``security`` table in ``raw`` is read (paths
        relative to the working directory) with the environment's overrides.
        """
        if security is None:
            security = Security.from_settings(raw.get("security", {}), Path("."))
        nodes = {
            name: NodePlacement(
                name=name,
                computation=str(body["computation"]),
                intervals=tuple(int(i) for i in body["intervals"]),
                address=str(body["address"]),
                epoch=int(body.get("epoch", 1)),
                metrics_port=body.get("metrics_port"),
                dedup_retention_ms=(
                    None
                    if body.get("dedup_retention_ms") is None
                    else int(body["dedup_retention_ms"])
                ),
            )
            for name, body in raw.get("nodes", {}).items()
        }
        sinks = {str(s): str(body["address"]) for s, body in raw.get("sinks", {}).items()}
        sink_paths = {
            str(s): str(body["path"]) for s, body in raw.get("sinks", {}).items() if "path" in body
        }
        sink_dedup_retention_ms = {
            str(s): int(body["dedup_retention_ms"])
            for s, body in raw.get("sinks", {}).items()
            if body.get("dedup_retention_ms") is not None
        }
        sink_formats = {
            str(s): body["format"] for s, body in raw.get("sinks", {}).items() if "format" in body
        }
        injector = None
        if "injector" in raw:
            body = raw["injector"]
            injector = InjectorPlacement(
                address=str(body["address"]),
                out_of_orderness_ms=int(body.get("out_of_orderness_ms", 5_000)),
                idle_timeout_ms=int(body.get("idle_timeout_ms", 10_000)),
                metrics_port=body.get("metrics_port"),
                file_sources={str(k): str(v) for k, v in body.get("file_sources", {}).items()},
                segment_bytes=int(body.get("segment_bytes", 64 << 20)),
                segment_ms=int(body.get("segment_ms", 10 * 60_000)),
                retention_ms=body.get("retention_ms"),
                archive_uri=None if body.get("archive_uri") is None else str(body["archive_uri"]),
                archive_retention_ms=body.get("archive_retention_ms"),
            )
        authority = raw.get("authority") or (injector.address if injector else None)
        deployment = cls(
            topology=topology,
            nodes=nodes,
            sinks=sinks,
            sink_paths=sink_paths,
            sink_formats=sink_formats,
            sink_dedup_retention_ms=sink_dedup_retention_ms,
            authority=authority,
            injector=injector,
            security=security,
        )
        problems = deployment._problems()
        if problems:
            raise TopologyError(problems)
        return deployment

    def _problems(self) -> list[str]:
        problems: list[str] = []
        hosted: dict[tuple[str, int], str] = {}
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
                elif (node.computation, index) in hosted:
                    other = hosted[(node.computation, index)]
                    where = f"on {other!r} and {node.name!r}"
                    problems.append(f"interval {index} of {node.computation!r} is {where}")
                else:
                    hosted[(node.computation, index)] = node.name
        for name, spec in self.topology.computations.items():
            for index in range(spec.intervals):
                if (name, index) not in hosted:
                    problems.append(f"interval {index} of {name!r} is hosted by no node")
        sources = set(self.topology.sources())
        for stream in self.injector.file_sources if self.injector else {}:
            if stream not in sources:
                problems.append(f"file source {stream!r} is not a source stream of the topology")
        for stream in self.topology.sinks():
            if stream not in self.sinks:
                problems.append(f"sink stream {stream!r} has no [sinks.{stream}] address")
        for stream, form in self.sink_formats.items():
            if form not in SINK_FORMATS:
                choices = " or ".join(f'"{f}"' for f in SINK_FORMATS)
                problems.append(
                    f"sink {stream!r}: [sinks.{stream}] format must be {choices}, not {form!r}"
                )
        return problems

    def sink_format(self, stream: str) -> str:
        """The output format ``millrace sink`` writes ``stream`` in (default ``"jsonl"``)."""
        return self.sink_formats.get(stream, "jsonl")

    def address_of(self, consumer: str, interval: int) -> str:
        """The address that receives deliveries for ``consumer``'s ``interval`` (or a sink)."""
        if consumer.startswith(SINK_PREFIX):
            return self.sinks[consumer[len(SINK_PREFIX) :]]
        address = self._node_addresses.get((consumer, interval))
        if address is None:
            raise KeyError(f"no node hosts interval {interval} of {consumer!r}")
        return address

    @cached_property
    def _node_addresses(self) -> dict[tuple[str, int], str]:
        """(computation, interval) -> its node's address, the first node listed winning
        (routing asks for every production)."""
        addresses: dict[tuple[str, int], str] = {}
        for node in self.nodes.values():
            for interval in node.intervals:
                addresses.setdefault((node.computation, interval), node.address)
        return addresses
