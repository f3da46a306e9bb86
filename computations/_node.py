"""``Node``: one process hosting key intervals of one computation.

``start`` opens a RocksDB store per hosted interval (claiming an epoch newer
than any earlier incarnation's, which fences a zombie), builds a processor
and a worker for each, resends every outbox, and serves ``Delivery``,
``Admin``, gRPC health and reflection, and Prometheus metrics. ``stop``
drains: the server stops taking work, workers finish their turn, stores close.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path

import grpc
from prometheus_client import start_http_server

from computations._admin_service import AdminService
from computations._control_link import AssignmentWatch, register_intervals
from computations._delivery_service import SERVICE as DELIVERY_SERVICE
from computations._delivery_service import DeliveryService
from computations._deployment import Deployment
from computations._node_metrics import NodeMetrics
from computations._outbox import Frame, Production
from computations._outcome import BatchOutcome
from computations._processor import IntervalProcessor
from computations._sender import CHANNEL_OPTIONS, DownstreamSender, Origin, SenderPool
from computations._watermark_link import WatermarkLink
from computations._worker import IntervalWorker, WorkerHooks
from millrace._service_support import serve_health_and_reflection
from millrace.security import Security
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc
from statestore import StateStore, StoreConfig

log = logging.getLogger(__name__)


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
        self.processors: dict[tuple[str, int], IntervalProcessor] = {}
        self.workers: dict[tuple[str, int], IntervalWorker] = {}
        self._senders = SenderPool(
            sender_id=self.name, callbacks=self, channel_factory=self._open_channel
        )
        self.metrics = NodeMetrics(
            self.processors,
            self._senders.all,
            lambda name, interval: self.workers[(name, interval)].fenced,
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
        self._watch: AssignmentWatch | None = None
        self.port = 0
        self.metrics_port = 0

    # -- life cycle -----------------------------------------------------------

    def start(self) -> None:
        """Lease the intervals, open stores, start workers, senders and servers."""
        computation = self.placement.computation
        leased = self._lease()
        for interval in self.placement.intervals:
            path = self.data_dir / computation / str(interval)
            store = StateStore.open_rocksdb(path, config=self._store_config)
            # The injector's lease when there is one; never below an earlier incarnation's.
            epoch = max(leased.get(interval, self.placement.epoch), store.owner_epoch + 1)
            self.processors[(computation, interval)] = IntervalProcessor(
                topology=self.deployment.topology,
                computation=computation,
                interval=interval,
                store=store,
                epoch=epoch,
            )
            recovered = {
                "computation": computation, "interval": interval, "epoch": epoch,
                "dedup_ids": store.recovered_ids, "timers": store.pending_timers,
                "outbox": len(self.processors[(computation, interval)].in_flight),
            }  # fmt: skip
            log.info(
                "interval %(computation)s/%(interval)s recovered: epoch %(epoch)d, "
                "%(dedup_ids)d dedup ids, %(timers)d timers, %(outbox)d in outbox",
                recovered,
                extra={"event": "recovered", **recovered},
            )
        for key, processor in self.processors.items():
            self.workers[key] = IntervalWorker(processor, self)
        self._server = self._build_server()
        self.port = self.security.bind(self._server, self.address)
        if self.port == 0:
            raise OSError(f"node {self.name}: cannot listen on {self.address}")
        self._server.start()
        for worker in self.workers.values():
            worker.start()
        self._link.start()
        if self._watch is not None:
            self._watch.start()
        if self.placement.metrics_port is not None:
            server, _ = start_http_server(
                self.placement.metrics_port, registry=self.metrics.registry
            )
            self.metrics_port = server.server_port
        log.info(
            "node %s started: %s intervals %s on port %d",
            self.name, computation, list(self.placement.intervals), self.port,
            extra={"event": "start", "node": self.name, "computation": computation,
                   "port": self.port, "metrics_port": self.metrics_port},
        )  # fmt: skip

    def _lease(self) -> dict[int, int]:
        """Epochs from the injector's ownership registry (none without an injector)."""
        injector = self.deployment.injector
        if injector is None:
            return {}
        leased = register_intervals(
            injector.address,
            node_id=self.name,
            computation=self.placement.computation,
            node_address=self.address,
            intervals=list(self.placement.intervals),
            security=self.security,
        )
        self._watch = AssignmentWatch(
            injector.address,
            computation=self.placement.computation,
            held=lambda: {p.interval: p.epoch for p in self.processors.values()},
            on_superseded=self._superseded,
            security=self.security,
        )
        return leased

    def _superseded(self, interval: int, epoch: int, owner: str) -> None:
        worker = self.workers.get((self.placement.computation, interval))
        if worker is not None and not worker.fenced:
            worker.fence(epoch, f"interval leased to {owner} at epoch {epoch}")

    def _build_server(self) -> grpc.Server:
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix=f"{self.name}-rpc"),
            options=CHANNEL_OPTIONS,
            interceptors=self.security.server_interceptors(),
        )
        server.add_generic_rpc_handlers((DeliveryService(self.workers).handler(),))
        admin_pb2_grpc.add_AdminServicer_to_server(AdminService(self), server)
        admin = admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name
        serve_health_and_reflection(server, (DELIVERY_SERVICE, admin))
        return server

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop taking work, finish in-flight turns, close the stores."""
        if self._server is not None:
            self._server.stop(grace_s).wait()
        self._link.stop()
        if self._watch is not None:
            self._watch.stop()
        # Senders first: a worker blocked in ``submit`` behind a slow consumer's full queue
        # is only released by its sender stopping (what it did not send stays in the outbox).
        self._senders.stop()
        for worker in self.workers.values():
            worker.stop()
        for processor in self.processors.values():
            processor.store.close()
        log.info("node %s stopped", self.name, extra={"event": "stop", "node": self.name})

    def wait(self) -> None:
        """Block until the gRPC server terminates."""
        if self._server is not None:
            self._server.wait_for_termination()

    # -- worker hooks -----------------------------------------------------------

    def route(self, origin: Origin, frames: list[Frame]) -> None:
        by_address: dict[str, list[Frame]] = {}
        for frame in frames:
            address = self.deployment.address_of(frame.consumer, frame.interval)
            by_address.setdefault(address, []).append(frame)
        for address, items in by_address.items():
            self._senders.get(address).submit_frames(origin, items)

    def report(self, worker: IntervalWorker, urgent: bool) -> None:
        processor = worker.processor
        self._link.report(
            processor.name, processor.interval, processor.epoch, processor.oldest_work(), urgent
        )

    def committed(self, worker: IntervalWorker, outcome: BatchOutcome, seconds: float) -> None:
        self.metrics.committed(worker.processor.name, outcome, seconds)

    # -- sender callbacks ----------------------------------------------------------

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        self.workers[(origin.computation, origin.interval)].acknowledged(outbox_keys)

    def fenced(self, origin: Origin, message: str) -> None:
        self.workers[(origin.computation, origin.interval)].fence(origin.epoch + 1, message)

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        self.workers[(origin.computation, origin.interval)].refused(production, message)

    # -- internals ----------------------------------------------------------------

    def _open_channel(self, address: str) -> grpc.Channel:
        return self.security.open_channel(address, options=CHANNEL_OPTIONS)

    def senders(self) -> Iterable[DownstreamSender]:
        """The senders created so far."""
        return self._senders.all()

    def _watermark(self, mark: int) -> None:
        for worker in self.workers.values():
            worker.set_watermark(mark)
