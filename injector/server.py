"""``Injector``: brings records in and publishes how far event time has progressed.

Per source stream: a durable :class:`StreamLog`, its :class:`GroupCommitter`
(the ``Ingest`` service's only writer), a :class:`Forwarder` to the first
computations and a :class:`SourceWatermark`. One :class:`WatermarkAuthority`
for the topology, fed by the nodes' reports and by the source watermarks, which
the :class:`~injector.upkeep.Upkeep` thread publishes and journals. All on one
gRPC server (Ingest, WatermarkAuthority, Control, health, reflection).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from prometheus_client import start_http_server

from millrace.computations import MIN_TIME, IntervalId, Layout
from millrace.delivery import CHANNEL_OPTIONS, DownstreamSender, Origin, Routes, SenderPool
from millrace.deployment import (
    EXCLUSIVE_PORT,
    STREAM_SERVER_OPTIONS,
    Deployment,
    RequestGuard,
    StreamLimiter,
    metrics_host,
    serve_health_and_reflection,
)
from millrace.deployment.security import Security
from millrace.engine import SOURCE_PREFIX, Production, reroute, source_name
from millrace.injector.archive import ArchiveLocation, LogArchiver
from millrace.injector.authority_service import WatermarkAuthorityServicer
from millrace.injector.control_service import ControlService
from millrace.injector.file_source import FileSource
from millrace.injector.ingest_stream import IngestStream
from millrace.injector.injector_metrics import InjectorMetrics
from millrace.injector.log import LogConfig, StreamLog
from millrace.injector.ownership import OwnershipRegistry
from millrace.injector.rebalance import LayoutMetrics, LoadTable, Rebalancer
from millrace.injector.upkeep import Upkeep, UpkeepSettings, read_journal
from millrace.injector.watermark_authority import WatermarkAuthority
from millrace.statestore import Clock, monotonic_ms, wall_clock_ms
from millrace.wire.v1 import (
    control_pb2,
    control_pb2_grpc,
    ingest_pb2,
    watermark_pb2,
    watermark_pb2_grpc,
)

log = logging.getLogger(__name__)

MAX_STREAMS = 64
"""Streaming calls (IngestStream, watermark and assignment watches) served at once."""
MAX_STREAMS_PER_PEER = 16
SPARE_THREADS = 32
"""Server threads no stream can take: ingest, reports, registrations, health answer."""


@dataclass(frozen=True, kw_only=True)
class InjectorConfig:
    """Settings of the injector (``[injector]`` in the deployment file)."""

    out_of_orderness_ms: int = 5_000
    idle_timeout_ms: int = 10_000
    log: LogConfig = field(default_factory=LogConfig)
    retention_ms: int | None = None
    archive_uri: str | None = None
    """Copy sealed segments here (:mod:`injector.archive`); local retention then waits
    for the copy."""
    archive_retention_ms: int | None = None
    idle_excluded: frozenset[str] = frozenset()
    """Source streams that stop holding back watermarks while idle."""


class Injector:
    """The injector process's runtime (also usable in-process by tests)."""

    def __init__(
        self,
        deployment: Deployment,
        log_dir: str | Path,
        *,
        address: str,
        config: InjectorConfig | None = None,
        metrics_port: int | None = None,
        clock: Clock = wall_clock_ms,
        elapsed_clock: Clock | None = None,
        security: Security | None = None,
    ) -> None:
        """``clock``: the wall clock (timestamps, retention); ``elapsed_clock``: what a
        source's idleness is measured on (default: monotonic with the default ``clock``,
        else ``clock``: a test's own clock drives both)."""
        self.deployment = deployment
        self.security = deployment.security if security is None else security
        self.log_dir = Path(log_dir)
        self.address = address
        self.config = config or InjectorConfig()
        unknown = self.config.idle_excluded - set(deployment.topology.sources())
        if unknown:
            raise ValueError(
                f"[injector] idle_excluded names {sorted(unknown)}: not source streams of "
                f"the topology (its sources are {sorted(deployment.topology.sources())})"
            )
        self._clock = clock
        if elapsed_clock is None:
            elapsed_clock = monotonic_ms if clock is wall_clock_ms else clock
        self._elapsed_clock = elapsed_clock
        self._metrics_port = metrics_port
        self.ownership = OwnershipRegistry(
            deployment.topology, self.log_dir / "ownership.json", clock=clock
        )
        self.loads = LoadTable()
        """What the nodes report of their intervals' work (``Control.ReportLoad``)."""
        self.rebalancer = (
            Rebalancer(self.ownership, self.loads, deployment.nodes, deployment.rebalance)
            if deployment.rebalance.enabled
            else None
        )
        self.authority = WatermarkAuthority(
            deployment.topology,
            clock=clock,
            leased_epoch=self.ownership.epoch_of,
            intervals_now=lambda name: self.ownership.layout(name).ids(),
        )
        self._journal_path = self.log_dir / "watermarks.json"
        self.streams: dict[str, IngestStream] = {}
        self.file_sources: dict[str, FileSource] = {}
        self.routes = Routes(deployment)
        self._routed_version = -1
        self._layouts: dict[str, Layout] = {}
        """The layouts with split intervals the forwarders route by."""
        self._senders = SenderPool(
            sender_id="injector",
            callbacks=_Router(self.streams),
            channel_factory=self._open_channel,
            resolve=self.routes.address_of,
        )
        self.archiver: LogArchiver | None = None
        if self.config.archive_uri is not None:
            self.archiver = LogArchiver(
                ArchiveLocation(self.config.archive_uri),
                lambda: {name: stream.log for name, stream in self.streams.items()},
                clock=clock,
                retention_ms=self.config.archive_retention_ms,
            )
        self.metrics = InjectorMetrics(
            self.streams, self.file_sources, self.authority, archiver=self.archiver
        )
        self.metrics.registry.register(LayoutMetrics(self.ownership, self.loads, deployment.nodes))
        self._server: grpc.Server | None = None
        self.upkeep = Upkeep(
            self.streams,
            self.authority,
            self._journal_path,
            UpkeepSettings(
                idle_excluded=self.config.idle_excluded, retention_ms=self.config.retention_ms
            ),
            clock=clock,
            elapsed_clock=elapsed_clock,
            follow_routes=self._follow_routes,
            rebalance=self.rebalancer.tick if self.rebalancer is not None else None,
            archiver=self.archiver,
        )
        self.port = 0
        self.metrics_port = 0

    def sender(self, consumer: str, interval: int) -> DownstreamSender:
        """The sender to ``consumer``'s ``interval`` (shared by streams), which follows the
        interval's owner wherever it registered."""
        return self._senders.to(consumer, interval)

    def _follow_routes(self) -> None:
        """A node registered (maybe at a new address): senders follow its lease. An
        interval split (or two merged): the forwarders route by the layout now, and what
        the senders still held for an interval gone is routed again."""
        version, leases = self.ownership.leases()
        if version != self._routed_version:
            self._routed_version = version
            if self.routes.update(
                (lease.computation, lease.index, lease.address) for lease in leases
            ):
                self._senders.refresh()
            self._follow_layouts()

    def _follow_layouts(self) -> None:
        topology = self.deployment.topology
        layouts = {
            name: layout
            for name in topology.computations
            if (layout := self.ownership.layout(name)).uniform != layout.base_count
        }
        if layouts == self._layouts:
            return
        before, self._layouts = self._layouts, layouts
        for stream in self.streams.values():
            stream.forwarder.route_by(layouts)
        gone: list[IntervalId] = []
        for name, spec in topology.computations.items():
            was = before[name].ids() if name in before else range(spec.intervals)
            now = set(layouts[name].ids() if name in layouts else range(spec.intervals))
            gone.extend(IntervalId(name, interval) for interval in sorted(set(was) - now))
        if gone:  # off the ticker: submitting waits while the new senders' queues are full
            threading.Thread(
                target=self._reroute, args=(gone, layouts), name="reroute", daemon=True
            ).start()

    def _reroute(self, gone: list[IntervalId], layouts: dict[str, Layout]) -> None:
        """Route again what the senders held for intervals split or merged away."""
        for name, interval in gone:
            for origin, frames in self._senders.retire(name, interval):
                for frame in reroute(frames, self.deployment.topology, layouts):
                    self.sender(frame.consumer, frame.interval).submit_frames(origin, [frame])

    def _open_channel(self, address: str) -> grpc.Channel:
        return self.security.open_channel(address, options=CHANNEL_OPTIONS)

    def start(self) -> None:
        """Recover the logs, start writers, forwarders, the server and the watermark loop."""
        if self._journal_path.exists():
            self.authority.restore(read_journal(self._journal_path))
        if self.ownership.lost is not None:
            log.warning(
                "%s is missing: the registry goes on from the epochs its twin holds (and the "
                "watermark journal's), never granting one of them again",
                self.ownership.lost,
                extra={"event": "registry_file_lost", "path": str(self.ownership.lost)},
            )
        # Should ownership.json be lost, epochs the authority saw are still never reissued.
        for (computation, index), epoch in self.authority.reported_epochs().items():
            self.ownership.raise_floor(computation, index, epoch)
        self.authority.require_durability()
        for stream in self.deployment.topology.sources():
            stream_log = StreamLog.open(self.log_dir / stream, stream, config=self.config.log)
            report = stream_log.recovery
            if report is not None and report.reason:
                log.warning(
                    "log %s: truncated %d bytes (%d entries) at %s: %s",
                    stream, report.truncated_bytes, report.dropped_entries, report.segment,
                    report.reason,
                    extra={"event": "log_truncated", "stream": stream,
                           "truncated_bytes": report.truncated_bytes,
                           "dropped_entries": report.dropped_entries},
                )  # fmt: skip
            log.info(
                "log %s recovered: %d segment(s), next offset %d",
                stream, len(stream_log.segments()), stream_log.next_offset,
                extra={"event": "recovered", "stream": stream,
                       "segments": len(stream_log.segments()),
                       "next_offset": stream_log.next_offset},
            )  # fmt: skip
            self.streams[stream] = IngestStream(
                stream_log,
                topology=self.deployment.topology,
                sender=self.sender,
                metrics=self.metrics,
                out_of_orderness_ms=self.config.out_of_orderness_ms,
                idle_timeout_ms=self.config.idle_timeout_ms,
                published_ms=self.authority.watermarks().get(source_name(stream), MIN_TIME),
                clock=self._clock,
                elapsed_clock=self._elapsed_clock,
            )
        # The port before anything runs: a second injector on it forwards nothing.
        self._server = self._build_server()
        self.port = self.security.bind(self._server, self.address)
        for ingest in self.streams.values():
            ingest.committer.start()
            ingest.forwarder.start()
        placement = self.deployment.injector
        for name, directory in (placement.file_sources if placement else {}).items():
            source = FileSource(
                Path(directory), self.streams[name].committer, self.log_dir / name / "rejects.jsonl"
            )
            source.start()
            self.file_sources[name] = source
        if self.archiver is not None:
            self.archiver.start()  # reads the manifest first: an unreadable archive stops here
        self._server.start()
        self.upkeep.start()
        if self._metrics_port is not None:
            server, _ = start_http_server(
                self._metrics_port, addr=metrics_host(self.address), registry=self.metrics.registry
            )
            self.metrics_port = server.server_port
        log.info(
            "injector started on port %d: streams %s",
            self.port, sorted(self.streams),
            extra={"event": "start", "port": self.port, "metrics_port": self.metrics_port,
                   "streams": sorted(self.streams)},
        )  # fmt: skip

    def _build_server(self) -> grpc.Server:
        from millrace.injector.ingest_service import IngestService, add_ingest_service

        self.stream_limiter = StreamLimiter(
            max_streams=MAX_STREAMS, max_per_peer=MAX_STREAMS_PER_PEER, server="the injector"
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=MAX_STREAMS + SPARE_THREADS, thread_name_prefix="injector-rpc"
            ),
            options=[*CHANNEL_OPTIONS, EXCLUSIVE_PORT, *STREAM_SERVER_OPTIONS],
            interceptors=[
                *self.security.server_interceptors(),
                RequestGuard(),
                self.stream_limiter,
            ],
        )
        add_ingest_service(IngestService(self.streams), server)
        watermark_pb2_grpc.add_WatermarkAuthorityServicer_to_server(
            WatermarkAuthorityServicer(self.authority), server
        )
        control = ControlService(
            self.ownership,
            self.deployment.nodes,
            loads=self.loads,
            rebalancing=self.rebalancer is not None,
        )
        control_pb2_grpc.add_ControlServicer_to_server(control, server)
        services = (
            ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name,
            watermark_pb2.DESCRIPTOR.services_by_name["WatermarkAuthority"].full_name,
            control_pb2.DESCRIPTOR.services_by_name["Control"].full_name,
        )
        serve_health_and_reflection(server, services)
        return server

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop taking requests, flush the writers, persist forwarding offsets, close logs."""
        self.upkeep.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait()
        for source in self.file_sources.values():
            source.stop()
        if self.archiver is not None:
            self.archiver.stop()
        for stream in self.streams.values():
            stream.committer.stop()
        # Senders first: a forwarder blocked in ``submit`` behind an unreachable node's full
        # queue is only released by its sender stopping.
        self._senders.stop()
        for stream in self.streams.values():
            stream.forwarder.stop()
            stream.log.close()
        try:
            self.upkeep.journal()
        except OSError as exc:
            log.error("the watermark journal cannot be written at stop: %s", exc)
        log.info("injector stopped", extra={"event": "stop"})

    def wait(self) -> None:
        """Block until the gRPC server terminates."""
        if self._server is not None:
            self._server.wait_for_termination()


class _Router:
    """Sender callbacks: hand each ack to the forwarder of its stream, which the
    origin's sequence names (``source:<stream>``, the forwarder's own)."""

    def __init__(self, streams: Mapping[str, IngestStream]) -> None:
        self._streams = streams

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        stream = self._streams.get(origin.sequence.removeprefix(SOURCE_PREFIX))
        if stream is not None:
            stream.forwarder.acked_keys(outbox_keys)

    def fenced(self, origin: Origin, message: str) -> None:
        log.error("a node refused the injector as stale: %s", message)

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        log.error(
            "record %s of %s refused for good by %s/%s: %s",
            production.record.record_id.hex(), production.record.stream,
            production.consumer, production.interval, message,
        )  # fmt: skip
        self.acked(origin, [production.outbox_key])
