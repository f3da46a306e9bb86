"""``HostedIntervals``: the key intervals one node runs, from store to worker.

An interval comes to run here at start (its store opened, made first when it
was split or merged here, then leased from the injector's ownership registry
above the epoch the store claimed) or later, taken over when the registry
moves it here; either way it gets a processor and a worker. It stops running
here for good when :meth:`HostedIntervals.release` fences and stops its
worker and closes its store (moved, split or merged away).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from millrace.computations import IntervalId
from millrace.delivery import DownstreamSender
from millrace.deployment import Deployment, NodePlacement
from millrace.deployment.security import Security
from millrace.engine import IntervalProcessor
from millrace.node._control_link import register_intervals
from millrace.node._interval_moves import Layout, intervals_to_open
from millrace.node._interval_splits import SplitLayouts, StoreMaker
from millrace.node._worker import IntervalWorker, WorkerHooks
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import control_pb2

log = logging.getLogger(__name__)


class HostedIntervals:
    """The intervals a node runs (``processors`` and ``workers`` by interval) and how
    one starts or stops running here: open, lease, take over, release."""

    def __init__(
        self,
        deployment: Deployment,
        *,
        node_id: str,
        data_dir: Path,
        store_config: StoreConfig,
        security: Security,
        splits: SplitLayouts,
        hooks: WorkerHooks,
        senders: Callable[[], Iterable[DownstreamSender]],
        forget_reports: Callable[[str, int], None],
        own_address: Callable[[], str],
        stopping: Callable[[], bool],
        check_lease: Callable[[], None],
    ) -> None:
        """``hooks``: what every worker calls out to (the node); ``senders()`` the senders
        so far; ``forget_reports(computation, interval)`` stops reporting an interval's
        oldest work; ``own_address()`` where others reach the node; ``stopping()`` True
        once the node stops; ``check_lease()`` asks the registry now (nothing without it).
        """
        self._deployment = deployment
        self._placement: NodePlacement = deployment.nodes[node_id]
        self._node_id = node_id
        self._data_dir = data_dir
        self._store_config = store_config
        self._security = security
        self._splits = splits
        self._hooks = hooks
        self._senders = senders
        self._forget_reports = forget_reports
        self._own_address = own_address
        self._stopping = stopping
        self._check_lease = check_lease
        self.processors: dict[IntervalId, IntervalProcessor] = {}
        self.workers: dict[IntervalId, IntervalWorker] = {}
        computation = self._placement.computation
        self._store_maker = StoreMaker(
            computation=computation,
            base_count=deployment.topology.computations[computation].intervals,
            store_path=self.store_path,
            store_config=store_config,
            release=self.release,
        )

    def store_path(self, interval: int) -> Path:
        """Where ``interval``'s store lives on this node."""
        return self._data_dir / self._placement.computation / str(interval)

    def make_store(self, interval: int) -> bool:
        """Make ``interval``'s store from the stores here it was split or merged from
        (False: it is made of none here)."""
        return self._store_maker.make(interval)

    # -- at start -------------------------------------------------------------------

    def open_at_start(self, layout: control_pb2.Assignment | None) -> dict[int, StateStore]:
        """The stores (their locks held) of the intervals this node starts with: those
        placed here, or, by the registry's ``layout``, those it runs here now."""
        computation = self._placement.computation
        local = (
            list(self._placement.intervals)
            if layout is None
            else intervals_to_open(
                self._placement.intervals,
                Layout.of(layout, computation),
                self._node_id,
                self._splits.current(computation),
            )
        )
        for interval in list(local):
            if self.store_path(interval).is_dir():
                continue
            try:  # split or merged here before a restart, its store not made yet
                self._store_maker.make(interval)
            except FileNotFoundError as exc:
                log.warning("interval %s/%s not opened: %s", computation, interval, exc)
                local.remove(interval)
        return self._open_stores(local)

    def _open_stores(self, intervals: list[int]) -> dict[int, StateStore]:
        """Every hosted interval's store (its lock held), or none and the error."""
        stores: dict[int, StateStore] = {}
        try:
            for interval in intervals:
                path = self.store_path(interval)
                stores[interval] = StateStore.open_rocksdb(path, config=self._store_config)
        except BaseException:
            for store in stores.values():
                store.close()
            raise
        return stores

    def lease(self, stored_epochs: dict[int, int]) -> dict[int, int]:
        """Epochs from the injector's ownership registry (none without an injector),
        above the epochs the stores already claimed."""
        injector = self._deployment.injector
        if injector is None or not stored_epochs:
            return {}
        return register_intervals(
            injector.address,
            node_id=self._node_id,
            computation=self._placement.computation,
            node_address=self._own_address(),
            intervals=sorted(stored_epochs),
            stored_epochs=stored_epochs,
            security=self._security,
        )

    def run_leased(self, stores: dict[int, StateStore], leased: dict[int, int]) -> None:
        """Run every opened store's interval the registry leased here (every one without
        an injector), closing the others; the workers still to start."""
        for interval, store in stores.items():
            if self._deployment.injector is not None and interval not in leased:
                store.close()  # moved to another node since the layout was read
                continue
            # The registry's lease is above the stored epoch; without an injector the
            # deployment's epoch, never below an earlier incarnation's.
            self._add(interval, store, leased.get(interval, self._placement.epoch))

    # -- while running ----------------------------------------------------------------

    def _add(self, interval: int, store: StateStore, leased_epoch: int) -> IntervalWorker:
        """Run ``interval`` over its opened ``store`` (the worker still to start)."""
        computation = self._placement.computation
        processor = IntervalProcessor(
            topology=self._deployment.topology,
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
        worker = IntervalWorker(processor, self._hooks)
        self.processors[IntervalId(computation, interval)] = processor
        self.workers[IntervalId(computation, interval)] = worker
        return worker

    def take_over(self, interval: int, store: StateStore) -> bool:
        """Register an interval moved here (its store opened) and run it; False when the
        registry refused it."""
        injector = self._deployment.injector
        if self._stopping() or injector is None:
            return False
        computation = self._placement.computation
        leased = register_intervals(
            injector.address,
            node_id=self._node_id,
            computation=computation,
            node_address=self._own_address(),
            intervals=[interval],
            stored_epochs={interval: store.owner_epoch},
            security=self._security,
        )
        if interval not in leased:
            return False
        worker = self._add(interval, store, leased[interval])
        worker.start()
        self._check_lease()
        log.info(
            "interval %s/%s taken over at epoch %d", computation, interval,
            worker.processor.epoch,
            extra={"event": "move_done", "computation": computation,
                   "interval": interval, "epoch": worker.processor.epoch},
        )  # fmt: skip
        return True

    def release(self, interval: int, reason: str) -> int | None:
        """Stop running ``interval`` for good and close its store; its epoch (None when it
        was not running here)."""
        key = IntervalId(self._placement.computation, interval)
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
        for sender in self._senders():
            sender.forget(worker.origin)
        self._forget_reports(*key)
        epoch = processor.store.owner_epoch
        processor.store.close()
        return epoch
