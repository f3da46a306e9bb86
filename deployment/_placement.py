"""The deployment file without its topology: where every service listens.

Clients (``millrace inject``, ``millrace sink``) need addresses and security only;
reading them here imports neither the user's computations nor the engine, so a
client starts in a fraction of the time a node does. :class:`Deployment` adds
the topology and checks the two against each other.

Every table is read strictly: a setting the table does not have, a missing
required one or one of the wrong type is a problem naming its table, and all
problems of a file are reported together (:class:`DeploymentError`).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millrace.deployment._settings_tables import SettingsTable, named_tables, tables_of
from millrace.deployment.security import Security

ENV_PREFIX = "MILLRACE__"
SINK_FORMATS = ("jsonl", "parquet")
"""The output formats of ``millrace sink`` (``format`` in ``[sinks.STREAM]``)."""


class DeploymentError(ValueError):
    """The deployment file is invalid; the message lists every problem, each naming its table."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid deployment:\n  - " + "\n  - ".join(problems))


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
    idle_excluded: tuple[str, ...] = ()
    """Source streams that stop holding back watermarks while idle (Flink's idleness):
    no append for ``idle_timeout_ms`` and nothing unacknowledged."""


@dataclass(frozen=True, kw_only=True)
class RebalanceSettings:
    """The ``[rebalance]`` table: whether and how the injector moves intervals by load
    (docs/intervals.md)."""

    enabled: bool = False
    period_ms: int = 5_000
    """How often the rebalancer looks at the loads (and makes at most one move)."""
    imbalance_percent: int = 30
    """Move only when the busiest node's load (the CPU its intervals' workers use, summed)
    exceeds the least busy one's by this much."""
    min_records_per_s: int = 200
    """Below this many records/s committed on the busiest node, no move is worth it."""
    max_moves_per_minute: int = 2
    cooldown_ms: int = 60_000
    """An interval moved stays where it went at least this long."""


TOP_LEVEL_SETTINGS = (
    "topology", "authority", "injector", "nodes", "sinks", "security", "rebalance",
)  # fmt: skip
"""The settings of the file's top level (docs/configuration.md)."""
NODE_SETTINGS = tuple(f.name for f in dataclasses.fields(NodePlacement) if f.name != "name")
"""The settings a ``[nodes.NAME]`` table accepts."""
INJECTOR_SETTINGS = tuple(f.name for f in dataclasses.fields(InjectorPlacement))
"""The settings the ``[injector]`` table accepts."""
REBALANCE_SETTINGS = tuple(f.name for f in dataclasses.fields(RebalanceSettings))
"""The settings the ``[rebalance]`` table accepts."""
SINK_SETTINGS = ("address", "path", "format", "dedup_retention_ms", "external", "metrics_port")
"""The settings a ``[sinks.STREAM]`` table accepts."""


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where the injector, every node and every sink listen, and the security they share."""

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
    external_sinks: frozenset[str] = frozenset()
    """Sink streams served by a process of the user's own (``external = true``):
    ``millrace up`` runs ``millrace sink`` for every other one."""
    sink_metrics_ports: Mapping[str, int] = field(default_factory=dict)
    """Sink stream -> Prometheus port of its ``millrace sink`` (when set; 0 picks one)."""
    authority: str | None = None
    injector: InjectorPlacement | None = None
    rebalance: RebalanceSettings = field(default_factory=RebalanceSettings)
    security: Security = field(default_factory=Security)
    """TLS material and the shared token of every process of the deployment."""
    topology_file: Path | None = None
    """The topology file the deployment file names (None: given as data)."""

    @classmethod
    def load(cls, path: str | Path) -> Placement:
        """Read a deployment file's placement and security, not its topology."""
        path = Path(path)
        raw, security = read_deployment_file(path)
        return cls(**placement_settings(raw, security), topology_file=topology_file(path, raw))

    def sink_format(self, stream: str) -> str:
        """The output format ``millrace sink`` writes ``stream`` in (default ``"jsonl"``)."""
        return self.sink_formats.get(stream, "jsonl")

    def sink_output(self, stream: str, data_dir: Path) -> Path:
        """Where ``millrace sink`` writes ``stream``: its ``path``, else under ``data_dir``
        (``sinks/STREAM.jsonl``, or the directory ``sinks/STREAM/`` for parquet)."""
        if (path := self.sink_paths.get(stream)) is not None:
            return Path(path)
        parquet = self.sink_format(stream) == "parquet"
        return data_dir / "sinks" / (stream if parquet else f"{stream}.jsonl")


def topology_file(path: Path, raw: Mapping[str, Any]) -> Path | None:
    """The topology file a deployment file at ``path`` names (relative to its directory)."""
    named = raw.get("topology")
    return path.parent / named if isinstance(named, str) else None


def read_deployment_file(path: Path) -> tuple[dict[str, Any], Security]:
    """The file's tables with the environment's overrides and paths made relative to
    the file, and its security."""
    with open(path, "rb") as handle:
        raw = tomllib.load(handle)
    apply_environment(raw, os.environ)
    for body in tables_of(raw.get("sinks")):
        if isinstance(body.get("path"), str):
            body["path"] = str(path.parent / body["path"])
    injector = raw.get("injector")
    if isinstance(injector, dict) and isinstance(injector.get("file_sources"), dict):
        injector["file_sources"] = {
            stream: str(path.parent / directory) if isinstance(directory, str) else directory
            for stream, directory in injector["file_sources"].items()
        }
    section = raw.get("security", {})
    if not isinstance(section, dict):
        raise DeploymentError([f"{path}: [security] must be a table"])
    try:
        security = Security.from_settings(section, path.parent)
    except ValueError as exc:
        raise DeploymentError([f"{path}: {exc}"]) from None
    return raw, security


def placement_settings(raw: Mapping[str, Any], security: Security) -> dict[str, Any]:
    """The :class:`Placement` fields of a deployment given as plain data, every
    problem of it raised together."""
    problems: list[str] = []
    top = SettingsTable("the top level", raw, TOP_LEVEL_SETTINGS, problems)
    nodes: dict[str, NodePlacement] = {}
    for name, body in named_tables(raw, "nodes", problems):
        table = SettingsTable(f"[nodes.{name}]", body, NODE_SETTINGS, problems)
        computation = table.text("computation")
        intervals = table.integers("intervals", default=[])
        address = table.text("address")
        epoch = table.integer("epoch", default=1, minimum=1)
        metrics_port = table.port("metrics_port")
        retention = table.integer("dedup_retention_ms", default=None, minimum=0)
        if computation is not None and intervals is not None and address is not None:
            nodes[name] = NodePlacement(
                name=name,
                computation=computation,
                intervals=intervals,
                address=address,
                epoch=1 if epoch is None else epoch,
                metrics_port=metrics_port,
                dedup_retention_ms=retention,
            )
    sinks: dict[str, str] = {}
    sink_paths: dict[str, str] = {}
    sink_formats: dict[str, str] = {}
    sink_retention: dict[str, int] = {}
    external: set[str] = set()
    sink_metrics: dict[str, int] = {}
    for stream, body in named_tables(raw, "sinks", problems):
        table = SettingsTable(f"[sinks.{stream}]", body, SINK_SETTINGS, problems)
        if (address := table.text("address")) is not None:
            sinks[stream] = address
        if (path := table.text("path", default=None)) is not None:
            sink_paths[stream] = path
        if (form := table.text("format", default=None)) is not None:
            if form in SINK_FORMATS:
                sink_formats[stream] = form
            else:
                choices = " or ".join(f'"{f}"' for f in SINK_FORMATS)
                problems.append(f"[sinks.{stream}] format must be {choices}, not {form!r}")
        retention = table.integer("dedup_retention_ms", default=None, minimum=0)
        if retention is not None:
            sink_retention[stream] = retention
        if table.boolean("external", default=False):
            external.add(stream)
        if (port := table.port("metrics_port")) is not None:
            sink_metrics[stream] = port
    injector = None
    if "injector" in raw:
        injector = _injector(
            SettingsTable("[injector]", raw["injector"], INJECTOR_SETTINGS, problems)
        )
    authority = top.text("authority", default=None) or (injector.address if injector else None)
    top.text("topology", default=None)  # its type; Deployment.load reads the file
    rebalance_table = SettingsTable(
        "[rebalance]", raw.get("rebalance", {}), REBALANCE_SETTINGS, problems
    )
    rebalance = _rebalance(rebalance_table)
    if problems:
        raise DeploymentError(problems)
    return {
        "nodes": nodes,
        "sinks": sinks,
        "sink_paths": sink_paths,
        "sink_formats": sink_formats,
        "sink_dedup_retention_ms": sink_retention,
        "external_sinks": frozenset(external),
        "sink_metrics_ports": sink_metrics,
        "authority": authority,
        "injector": injector,
        "rebalance": rebalance,
        "security": security,
    }


def _injector(table: SettingsTable) -> InjectorPlacement | None:
    address = table.text("address")
    read: dict[str, Any] = {  # every setting read (its problems reported); unset: defaults
        "out_of_orderness_ms": table.integer("out_of_orderness_ms", minimum=0),
        "idle_timeout_ms": table.integer("idle_timeout_ms", minimum=0),
        "metrics_port": table.port("metrics_port"),
        "file_sources": table.directories("file_sources"),
        "segment_bytes": table.integer("segment_bytes", minimum=1),
        "segment_ms": table.integer("segment_ms", minimum=1),
        "retention_ms": table.integer("retention_ms", minimum=0),
        "archive_uri": table.text("archive_uri", default=None),
        "archive_retention_ms": table.integer("archive_retention_ms", minimum=0),
        "idle_excluded": table.names("idle_excluded"),
    }
    if address is None:
        return None
    return InjectorPlacement(address=address, **{k: v for k, v in read.items() if v is not None})


def _rebalance(table: SettingsTable) -> RebalanceSettings:
    read: dict[str, Any] = {
        "enabled": table.boolean("enabled", default=False),
        "period_ms": table.integer("period_ms", minimum=100),
        "imbalance_percent": table.integer("imbalance_percent", minimum=1),
        "min_records_per_s": table.integer("min_records_per_s", minimum=0),
        "max_moves_per_minute": table.integer("max_moves_per_minute", minimum=1),
        "cooldown_ms": table.integer("cooldown_ms", minimum=0),
    }
    return RebalanceSettings(**{k: v for k, v in read.items() if v is not None})


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
