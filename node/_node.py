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
import time
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
from millrace.node._control_link import LeaseKeeper, register_intervals
from millrace.node._interval_moves import (
    IntervalMoves,
    Layout,
    intervals_to_open,
    is_drained,
    wait_for_assignment,
)
from millrace.node._interval_splits import SplitLayouts, StoreMaker
from millrace.node._load_reports import LoadReporter
from millrace.node._metrics import NodeMetrics
from millrace.node._retired_senders import FloorNotices
from millrace.node._stale_refusals import StaleRefusals
from millrace.node._watermark_link import WatermarkLink
from millrace.node._worker import IntervalWorker, WorkerHooks
from millrace.statestore import MAX_EPOCH, StateStore, StoreConfig
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, control_pb2

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
        self.processors: dict[IntervalId, IntervalProcessor] = {}
        self.workers: dict[IntervalId, IntervalWorker] = {}
        self.routes = Routes(deployment)
        self._senders = SenderPool(
            sender_id=self.name,
            callbacks=self,
            channel_factory=self._open_channel,
            resolve=self.routes.address_of,
        )
        self.metrics = NodeMetrics(
            self.processors,
            self._senders.all,
            lambda name, interval: self._fenced_reason(name, interval) != "",
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
        self._keeper: LeaseKeeper | None = None
        self._moves: IntervalMoves | None = None
        injector = deployment.injector
        self._registry = None if injector is None else self.security.open_channel(injector.address)
        """A channel to the injector's registry (moves, hand-overs); None without one."""
        self._stale = StaleRefusals()
        self._splits = SplitLayouts(deployment.topology)
        self._floor_notices = FloorNotices(
            sender_id=name,
            topology=deployment.topology,
            layouts=lambda: self._splits.layouts,
            address_of=self.routes.address_of,
            channel_factory=self._open_channel,
        )
        self._store_maker = StoreMaker(
            computation=self.placement.computation,
            base_count=deployment.topology.computations[self.placement.computation].intervals,
            store_path=self._store_path,
            store_config=self._store_config,
            release=self._release,
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
        local = (
            list(self.placement.intervals)
            if layout is None
            else intervals_to_open(
                self.placement.intervals,
                Layout.of(layout, computation),
                self.name,
                self._splits.current(computation),
            )
        )
        for interval in list(local):
            if self._store_path(interval).is_dir():
                continue
            try:  # split or merged here before a restart, its store not made yet
                self._store_maker.make(interval)
            except FileNotFoundError as exc:
                log.warning("interval %s/%s not opened: %s", computation, interval, exc)
                local.remove(interval)
        stores = self._open_stores(local)
        try:
            self._server = self._build_server()
            self.port = self.security.bind(self._server, self.address)
            leased = self._lease({i: store.owner_epoch for i, store in stores.items()})
        except BaseException:
            for store in stores.values():
                store.close()
            raise
        for interval, store in stores.items():
            if self._keeper is not None and interval not in leased:
                store.close()  # moved to another node since the layout was read
                continue
            # The registry's lease is above the stored epoch; without an injector the
            # deployment's epoch, never below an earlier incarnation's.
            self._add_interval(interval, store, leased.get(interval, self.placement.epoch))
        self._server.start()
        for worker in list(self.workers.values()):
            worker.start()
        self._link.start()
        if self._keeper is not None:
            self._keeper.start()
        if self._moves is not None and layout is not None:
            self._on_assignment(layout)
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

    def _add_interval(self, interval: int, store: StateStore, leased_epoch: int) -> IntervalWorker:
        """Run ``interval`` over its opened ``store`` (the worker still to start)."""
        computation = self.placement.computation
        processor = IntervalProcessor(
            topology=self.deployment.topology,
            computation=computation,
            interval=interval,
            store=store,
            epoch=max(leased_epoch, store.owner_epoch + 1),
        )
        processor.route_by(self._splits.layouts)
        status = processor.status()
        recovered = {
            "computation": computation, "interval": interval, "epoch": status.epoch,
            "dedup_ids": store.recovered_ids, "timers": status.pending_timers,
            "outbox": status.outbox_size,
        }  # fmt: skip
        log.info(
            "interval %(computation)s/%(interval)s recovered: epoch %(epoch)d, "
            "%(dedup_ids)d dedup ids, %(timers)d timers, %(outbox)d in outbox",
            recovered,
            extra={"event": "recovered", **recovered},
        )
        worker = IntervalWorker(processor, self)
        self.processors[IntervalId(computation, interval)] = processor
        self.workers[IntervalId(computation, interval)] = worker
        return worker

    def _open_stores(self, intervals: list[int]) -> dict[int, StateStore]:
        """Every hosted interval's store (its lock held), or none and the error."""
        stores: dict[int, StateStore] = {}
        try:
            for interval in intervals:
                path = self._store_path(interval)
                stores[interval] = StateStore.open_rocksdb(path, config=self._store_config)
        except BaseException:
            for store in stores.values():
                store.close()
            raise
        return stores

    def _store_path(self, interval: int) -> Path:
        """Where ``interval``'s store lives on this node."""
        return self.data_dir / self.placement.computation / str(interval)

    def _take_over(self, interval: int, store: StateStore) -> bool:
        """Register an interval moved here (its store opened) and run it; False when the
        registry refused it."""
        injector = self.deployment.injector
        if self._stopping or injector is None:
            return False
        leased = register_intervals(
            injector.address,
            node_id=self.name,
            computation=self.placement.computation,
            node_address=self.advertised_address,
            intervals=[interval],
            stored_epochs={interval: store.owner_epoch},
            security=self.security,
        )
        if interval not in leased:
            return False
        worker = self._add_interval(interval, store, leased[interval])
        worker.start()
        if self._keeper is not None:
            self._keeper.check_now()
        log.info(
            "interval %s/%s taken over at epoch %d", self.placement.computation, interval,
            worker.processor.epoch,
            extra={"event": "move_done", "computation": self.placement.computation,
                   "interval": interval, "epoch": worker.processor.epoch},
        )  # fmt: skip
        return True

    def _release(self, interval: int, reason: str) -> int | None:
        """Stop running ``interval`` for good and close its store; its epoch (None when it
        was not running here)."""
        key = IntervalId(self.placement.computation, interval)
        worker = self.workers.get(key)
        if worker is None:
            return None
        processor = worker.processor
        worker.fence(processor.epoch + 1, reason)
        worker.stop(timeout=60)
        if not worker.stopped:
            raise RuntimeError(f"interval {key[0]}/{interval} did not stop within 60 s")
        self.processors.pop(key, None)
        self.workers.pop(key, None)
        for sender in self._senders.all():
            sender.forget(worker.origin)
        self._link.forget(*key)
        epoch = processor.store.owner_epoch
        processor.store.close()
        return epoch

    def _lease(self, stored_epochs: dict[int, int]) -> dict[int, int]:
        """Epochs from the injector's ownership registry (none without an injector),
        above the epochs the stores already claimed; the lease keeper that follows them."""
        injector = self.deployment.injector
        if injector is None:
            return {}
        computation = self.placement.computation
        leased = (
            register_intervals(
                injector.address,
                node_id=self.name,
                computation=computation,
                node_address=self.advertised_address,
                intervals=sorted(stored_epochs),
                stored_epochs=stored_epochs,
                security=self.security,
            )
            if stored_epochs
            else {}
        )
        assert self._registry is not None
        self._moves = IntervalMoves(
            node_id=self.name,
            computation=computation,
            data_dir=self.data_dir,
            store_config=self._store_config,
            registry=self._registry,
            security=self.security,
            host=self._take_over,
            release=self._release,
            hosted=lambda: {i for _, i in list(self.processors)},
            make_store=self._store_maker.make,
        )
        self._keeper = LeaseKeeper(
            injector.address,
            held=lambda: {
                IntervalId(p.name, p.interval): p.epoch for p in list(self.processors.values())
            },
            on_superseded=self._superseded,
            on_routes=self._follow_routes,
            own_address=self.advertised_address,
            on_conflict=self._conflict,
            on_assignment=self._on_assignment,
            security=self.security,
        )
        return leased

    @property
    def advertised_address(self) -> str:
        """Where others reach this node: its listen address, or, when it listens on every
        interface, its placement's host with the port it listens on."""
        host, _, port = self.address.rpartition(":")
        if host in ("0.0.0.0", "[::]", "::", ""):
            placed_host = self.placement.address.rpartition(":")[0]
            return f"{placed_host}:{self.port or port}"
        return self.address

    def _follow_routes(self, leases: list[tuple[str, int, str]]) -> None:
        if self.routes.update(leases):
            self._senders.refresh()

    def _superseded(self, computation: str, interval: int, epoch: int, owner: str) -> None:
        worker = self.workers.get(IntervalId(computation, interval))
        if worker is not None and not worker.fenced:
            worker.fence(epoch, f"interval leased to {owner} at epoch {epoch}")

    def _conflict(self, computation: str, interval: int, epoch: int, owner: str) -> None:
        worker = self.workers.get(IntervalId(computation, interval))
        if worker is None or worker.fenced:
            return
        own = worker.processor.epoch
        reason = (
            f"lease conflict: {computation}/{interval} is leased to {owner} at epoch {epoch}, "
            f"not above this node's epoch {own}: the injector's registry lost the epochs it "
            "granted (ownership.json, epochs.json and watermarks.json); this node stops "
            "writing the interval and leaves it to that owner"
        )
        self._say_conflict(reason, computation, interval, own, leased_epoch=epoch, leased_to=owner)
        worker.fence(epoch, reason)

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
        if self._moves is not None:
            self._moves.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait()
        self._link.stop()
        if self._keeper is not None:
            self._keeper.stop()
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
        keeper = self._keeper
        if keeper is None:
            return not worker.fenced
        interval = IntervalId(worker.processor.name, worker.processor.interval)
        while not keeper.wait_fresh(interval, 0.5):
            if self._stopping or worker.fenced:
                return False
        return not worker.fenced

    def committed(self, worker: IntervalWorker, outcome: BatchOutcome, seconds: float) -> None:
        self.metrics.committed(worker.processor.name, outcome, seconds)

    def _on_assignment(self, assignment: control_pb2.Assignment) -> None:
        """Route by the layouts now; take over what moves here; notice that a drain is
        complete."""
        retired = self._splits.follow(assignment)
        if retired is not None:
            for processor in list(self.processors.values()):
                processor.route_by(self._splits.layouts)
            if retired:  # off the lease keeper's thread: submitting may wait for room
                threading.Thread(
                    target=self._reroute, args=(retired,), name="reroute", daemon=True
                ).start()
        if self._moves is not None:
            self._moves.follow(assignment)
        computation = self.placement.computation
        if (
            not self.drained.is_set()
            and not self.processors
            and is_drained(assignment, self.name, computation)
        ):
            log.info(
                "node %s drained: its intervals run elsewhere, nothing pending here", self.name,
                extra={"event": "drained", "node": self.name},
            )  # fmt: skip
            self.drained.set()

    def _reroute(self, retired: list[IntervalId]) -> None:
        """Route again what the senders held for intervals split or merged away."""
        for consumer, interval in retired:
            for origin, frames in self._senders.retire(consumer, interval):
                self.route(origin, frames)

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
        if self._keeper is None:
            worker.fence(origin.epoch + 1, message)
        elif not worker.fenced:
            self._keeper.check_now()
            interval = IntervalId(origin.computation, origin.interval)
            conflict = self._stale.note(interval, origin.epoch, message, time.monotonic())
            if conflict is not None:
                self._say_conflict(conflict, origin.computation, origin.interval, origin.epoch)
        if worker.fenced:
            for sender in self._senders.all():
                sender.forget(origin)

    def sender_epoch_ok(self, computation: str, index: int, epoch: int) -> bool:
        if not 0 <= epoch < MAX_EPOCH:
            return False
        keeper = self._keeper
        if keeper is None:
            return True  # no registry: epochs are what the deployment file and restarts made
        granted = keeper.granted_epoch(computation, index)
        if granted is not None and epoch > granted:
            keeper.check_now()  # maybe a lease newer than our last look
            return False
        return True

    def verify_lease(self) -> None:
        if self._keeper is not None:
            self._keeper.check_now()

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
        if self._moves is None or computation != self.placement.computation:
            raise FileNotFoundError(f"{computation}/{interval} is not run by node {self.name}")
        return self._moves.hand_over(
            interval, request.to_node_id, before_fence=request.before_fence, have=request.have
        )

    def _say_conflict(
        self, message: str, computation: str, interval: int, epoch: int, **extra: object
    ) -> None:
        """A lease conflict the registry cannot resolve: an error log line and a count."""
        self.metrics.lease_conflicts.labels(computation).inc()
        log.error(
            "%s", message,
            extra={"event": "lease_conflict", "computation": computation, "interval": interval,
                   "epoch": epoch, **extra},
        )  # fmt: skip
