"""``Node``: one process hosting key intervals of one computation.

``start`` opens a RocksDB store per hosted interval (claiming an epoch newer
than any earlier incarnation's, which fences a zombie), builds a processor
and a worker for each, resends every outbox, and serves ``Delivery``,
``Admin``, gRPC health and reflection, and Prometheus metrics. ``stop``
drains: the server stops taking work, workers finish their turn, stores close.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent import futures
from pathlib import Path

import grpc
from prometheus_client import start_http_server

from millrace.computations import IntervalId
from millrace.delivery import (
    CHANNEL_OPTIONS,
    DeliveryService,
    DownstreamSender,
    Origin,
    Routes,
    SenderPool,
)
from millrace.delivery import SERVICE as DELIVERY_SERVICE
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
from millrace.engine import (
    BatchOutcome,
    Frame,
    IntervalProcessor,
    Production,
    reroute,
)
from millrace.node._admin_service import AdminService
from millrace.node._hosted_intervals import HostedIntervals
from millrace.node._interval_moves import wait_for_assignment
from millrace.node._interval_splits import SplitLayouts
from millrace.node._load_reports import LoadReporter
from millrace.node._metrics import NodeMetrics
from millrace.node._registry_follower import RegistryFollower
from millrace.node._retired_senders import FloorNotices
from millrace.node._watermark_link import WatermarkLink
from millrace.node._worker import IntervalWorker, WorkerHooks
from millrace.statestore import MAX_EPOCH, StoreConfig
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc

log = logging.getLogger(__name__)

MAX_STREAMS = 48
"""Deliver (and health-watch) streams a node serves at once; more are RESOURCE_EXHAUSTED."""
MAX_STREAMS_PER_PEER = 16
SPARE_THREADS = 16
"""Server threads no stream can take: health checks and admin calls always answer."""


class Node(WorkerHooks):
    """A node process's runtime (also usable in-process, e.g. by tests and benchmarks)."""

    def __init__(
        self,
        deployment: Deployment,
        name: str,
        data_dir: str | Path,
        *,
        store_config: StoreConfig | None = None,
        address: str | None = None,
        security: Security | None = None,
    ) -> None:
        self.deployment = deployment
        self.security = deployment.security if security is None else security
        self.placement = deployment.nodes[name]
        self.name = name
        self.data_dir = Path(data_dir)
        self.address = address or self.placement.address
        self._store_config = store_config or StoreConfig(sync=True)
        self.routes = Routes(deployment)
        self._senders = SenderPool(
            sender_id=self.name,
            callbacks=self,
            channel_factory=self._open_channel,
            resolve=self.routes.address_of,
        )
        self._server: grpc.Server | None = None
        self._link = WatermarkLink(
            deployment.authority,
            node_id=name,
            topology=deployment.topology,
            computation=self.placement.computation,
            on_watermark=self._watermark,
            security=self.security,
        )
        injector = deployment.injector
        self._registry = None if injector is None else self.security.open_channel(injector.address)
        """A channel to the injector's registry (moves, hand-overs); None without one."""
        self._splits = SplitLayouts(deployment.topology)
        self._hosted = HostedIntervals(
            deployment,
            node_id=name,
            data_dir=self.data_dir,
            store_config=self._store_config,
            security=self.security,
            splits=self._splits,
            hooks=self,
            senders=self._senders.all,
            forget_reports=self._link.forget,
            own_address=lambda: self.advertised_address,
            stopping=lambda: self._stopping,
            check_lease=self.verify_lease,
        )
        self.processors: dict[IntervalId, IntervalProcessor] = self._hosted.processors
        self.workers: dict[IntervalId, IntervalWorker] = self._hosted.workers
        self.metrics = NodeMetrics(
            self.processors,
            self._senders.all,
            lambda name, interval: self._fenced_reason(name, interval) != "",
        )
        self._floor_notices = FloorNotices(
            sender_id=name,
            topology=deployment.topology,
            layouts=lambda: self._splits.layouts,
            address_of=self.routes.address_of,
            channel_factory=self._open_channel,
        )
        self._reporter = (
            None
            if self._registry is None
            else LoadReporter(
                self._registry,
                node_id=name,
                computation=self.placement.computation,
                running=self.workers.values,
            )
        )
        self.drained = threading.Event()
        """Set once the registry drained this node and another node holds all its
        intervals: nothing is pending here, the process may stop."""
        self._follower = RegistryFollower(
            node_id=name,
            computation=self.placement.computation,
            injector=None if injector is None else injector.address,
            registry=self._registry,
            data_dir=self.data_dir,
            store_config=self._store_config,
            security=self.security,
            hosted=self._hosted,
            splits=self._splits,
            routes=self.routes,
            senders=self._senders,
            route=self.route,
            metrics=self.metrics,
            drained=self.drained,
        )
        self._stopping = False
        self.port = 0
        self.metrics_port = 0

    # -- life cycle -----------------------------------------------------------

    def start(self) -> None:
        """Open the stores and bind the port, then lease the intervals; start everything.

        Every local check comes first: the stores' locks (another process runs
        these intervals) and the port (another process listens there). A start
        that fails on either has asked the registry for nothing, so it never
        fences the owner that runs.
        """
        computation = self.placement.computation
        # The registry's moves before anything is opened (None without an injector).
        layout = (
            None if self._registry is None else wait_for_assignment(self._registry, computation)
        )
        if layout is not None:
            self._splits.follow(layout)
        stores = self._hosted.open_at_start(layout)
        try:
            self._server = self._build_server()
            self.port = self.security.bind(self._server, self.address)
            leased = self._hosted.lease({i: store.owner_epoch for i, store in stores.items()})
            self._follower.connect(self.advertised_address)
        except BaseException:
            for store in stores.values():
                store.close()
            raise
        self._hosted.run_leased(stores, leased)
        self._server.start()
        for worker in list(self.workers.values()):
            worker.start()
        self._link.start()
        self._follower.start(layout)
        if self._reporter is not None:
            self._reporter.start()
        if self.placement.metrics_port is not None:
            server, _ = start_http_server(
                self.placement.metrics_port,
                addr=metrics_host(self.address),
                registry=self.metrics.registry,
            )
            self.metrics_port = server.server_port
        log.info(
            "node %s started: %s intervals %s on port %d",
            self.name, computation, sorted(i for _, i in self.processors), self.port,
            extra={"event": "start", "node": self.name, "computation": computation,
                   "port": self.port, "metrics_port": self.metrics_port},
        )  # fmt: skip

    @property
    def advertised_address(self) -> str:
        """Where others reach this node: its listen address, or, when it listens on every
        interface, its placement's host with the port it listens on."""
        host, _, port = self.address.rpartition(":")
        if host in ("0.0.0.0", "[::]", "::", ""):
            placed_host = self.placement.address.rpartition(":")[0]
            return f"{placed_host}:{self.port or port}"
        return self.address

    def _build_server(self) -> grpc.Server:
        self.stream_limiter = StreamLimiter(
            max_streams=MAX_STREAMS, max_per_peer=MAX_STREAMS_PER_PEER, server=f"node {self.name}"
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=MAX_STREAMS + SPARE_THREADS, thread_name_prefix=f"{self.name}-rpc"
            ),
            options=[*CHANNEL_OPTIONS, EXCLUSIVE_PORT, *STREAM_SERVER_OPTIONS],
            interceptors=[
                *self.security.server_interceptors(),
                RequestGuard(),
                self.stream_limiter,
            ],
        )
        server.add_generic_rpc_handlers((DeliveryService(self.workers).handler(),))
        admin_pb2_grpc.add_AdminServicer_to_server(
            AdminService(
                self.name,
                self.deployment.topology,
                self.processors,
                self._fenced_reason,
                hand_over=self._hand_over,
            ),
            server,
        )
        admin = admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name
        serve_health_and_reflection(server, (DELIVERY_SERVICE, admin))
        return server

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop taking work, finish in-flight turns, close the stores."""
        self._stopping = True
        if self._reporter is not None:
            self._reporter.stop()
        if self._follower.moves is not None:
            self._follower.moves.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait()
        self._link.stop()
        if self._follower.keeper is not None:
            self._follower.keeper.stop()
        # Senders first: a worker blocked in ``submit`` behind a slow consumer's full queue
        # is only released by its sender stopping (what it did not send stays in the outbox).
        self._senders.stop()
        for worker in list(self.workers.values()):
            worker.stop()
        for processor in list(self.processors.values()):
            processor.store.close()
        if self._registry is not None:
            self._registry.close()
        log.info("node %s stopped", self.name, extra={"event": "stop", "node": self.name})

    def wait(self) -> None:
        """Block until the gRPC server terminates."""
        if self._server is not None:
            self._server.wait_for_termination()

    # -- worker hooks -----------------------------------------------------------

    def route(self, origin: Origin, frames: list[Frame]) -> None:
        splits = self._splits
        if splits.reshaped:  # some frames may go to an interval split or merged away
            gone = [f for f in frames if splits.retired(f.consumer, f.interval)]
            if gone:
                kept = [f for f in frames if not splits.retired(f.consumer, f.interval)]
                frames = kept + reroute(gone, self.deployment.topology, splits.layouts)
        by_destination: dict[IntervalId, list[Frame]] = {}
        for frame in frames:
            by_destination.setdefault(IntervalId(frame.consumer, frame.interval), []).append(frame)
        for (consumer, interval), items in by_destination.items():
            self._senders.to(consumer, interval).submit_frames(origin, items)

    def retired(self, worker: IntervalWorker, floors: Mapping[int, int]) -> None:
        self._floor_notices.offer(worker.origin, floors, worker.forget_retired)

    def report(self, worker: IntervalWorker, urgent: bool) -> int:
        processor = worker.processor
        return self._link.report(
            processor.name, processor.interval, processor.epoch, processor.oldest_work(), urgent
        )

    def wait_reported(self, ticket: int) -> bool:
        while not self._link.wait_reported(ticket, 1.0):
            if self._stopping:
                return False
        return True

    def confirm_lease(self, worker: IntervalWorker) -> bool:
        keeper = self._follower.keeper
        if keeper is None:
            return not worker.fenced
        interval = IntervalId(worker.processor.name, worker.processor.interval)
        while not keeper.wait_fresh(interval, 0.5):
            if self._stopping or worker.fenced:
                return False
        return not worker.fenced

    def committed(self, worker: IntervalWorker, outcome: BatchOutcome, seconds: float) -> None:
        self.metrics.committed(worker.processor.name, outcome, seconds)

    # -- sender callbacks ----------------------------------------------------------

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        worker = self.workers.get(IntervalId(origin.computation, origin.interval))
        if worker is not None:  # None: handed over to another node since it sent
            worker.acknowledged(outbox_keys)

    def fenced(self, origin: Origin, message: str) -> None:
        """A receiver refused ``origin`` as stale: it knows a newer epoch of the interval.
        With a registry, believe it only once the registry confirms (the lease keeper then
        fences the worker); without one, fence now. A fenced origin's sends stop."""
        worker = self.workers.get(IntervalId(origin.computation, origin.interval))
        if worker is None:
            return  # handed over to another node since it sent
        self.metrics.stale_refusals.labels(origin.computation).inc()
        if self._follower.keeper is None:
            worker.fence(origin.epoch + 1, message)
        elif not worker.fenced:
            self._follower.refused_as_stale(origin, message)
        if worker.fenced:
            for sender in self._senders.all():
                sender.forget(origin)

    def sender_epoch_ok(self, computation: str, index: int, epoch: int) -> bool:
        if not 0 <= epoch < MAX_EPOCH:
            return False
        keeper = self._follower.keeper
        if keeper is None:
            return True  # no registry: epochs are what the deployment file and restarts made
        granted = keeper.granted_epoch(computation, index)
        if granted is not None and epoch > granted:
            keeper.check_now()  # maybe a lease newer than our last look
            return False
        return True

    def verify_lease(self) -> None:
        if self._follower.keeper is not None:
            self._follower.keeper.check_now()

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        worker = self.workers.get(IntervalId(origin.computation, origin.interval))
        if worker is not None:
            worker.refused(production, message)

    # -- internals ----------------------------------------------------------------

    def _open_channel(self, address: str) -> grpc.Channel:
        return self.security.open_channel(address, options=CHANNEL_OPTIONS)

    def senders(self) -> Iterable[DownstreamSender]:
        """The senders created so far."""
        return self._senders.all()

    def _watermark(self, mark: int) -> None:
        for worker in list(self.workers.values()):
            worker.set_watermark(mark)

    def _fenced_reason(self, computation: str, interval: int) -> str:
        worker = self.workers.get(IntervalId(computation, interval))
        return "handed over" if worker is None else worker.fenced_reason

    def _hand_over(self, request: admin_pb2.HandOverRequest) -> Iterator[admin_pb2.StoreFilePiece]:
        computation, interval = request.interval.computation, request.interval.index
        moves = self._follower.moves
        if moves is None or computation != self.placement.computation:
            raise FileNotFoundError(f"{computation}/{interval} is not run by node {self.name}")
        return moves.hand_over(
            interval, request.to_node_id, before_fence=request.before_fence, have=request.have
        )
