"""A node's side of live splits and merges (``Control.SplitInterval``, ``MergeInterval``).

The registry records that an interval splits: the computation's layout changes, the
interval is retired and its two halves are placed on the node that held it. That node
(:func:`make_halves`, called when it takes the halves over) stops running the
interval, copies its store once per half (RocksDB checkpoints) and cuts each copy down
to its half (``engine/_interval_halves.py``), then registers each half at an epoch
above the interval's and runs it. Each step is safe to repeat after a crash: a half's
store appears whole or not at all (made beside it, then renamed), and the interval's
store is deleted only once both halves' are there. A merge is the same steps the other
way: both halves stop, the lower half's store is copied, absorbs the upper's
(``engine/_interval_halves.merge_into``) and is renamed into place as the interval's,
then the halves' stores are deleted.

Every node follows the layouts of all computations (:class:`SplitLayouts`): its
processors route their productions by them, and what its senders still held for a
retired interval is routed again, to the intervals that hold its keys now
(``engine.reroute``).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from millrace.computations import IntervalId, KeyInterval, Layout, Topology
from millrace.deployment import fsync_directory
from millrace.engine import cut_to_half, merge_into
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import control_pb2

log = logging.getLogger(__name__)

_INCOMING = ".incoming"


def layouts_of(assignment: control_pb2.Assignment, topology: Topology) -> dict[str, Layout]:
    """The layout of every computation with split intervals, from an assignment."""
    ids: dict[str, list[int]] = {}
    for interval in assignment.layout:
        ids.setdefault(interval.computation, []).append(interval.index)
    return {
        name: Layout.of_ids(name, topology.computations[name].intervals, found)
        for name, found in ids.items()
        if name in topology.computations
    }


class SplitLayouts:
    """The layouts a node routes by (thread-safe): the first intervals of each
    computation until the assignment says it split."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._lock = threading.Lock()
        self.layouts: dict[str, Layout] = {}
        """Per computation with split intervals, its intervals now."""
        self._current: dict[str, frozenset[int]] = {
            name: frozenset(range(spec.intervals)) for name, spec in topology.computations.items()
        }
        self.reshaped = False
        """True once any layout was seen split: frames may then go to retired intervals."""

    def follow(self, assignment: control_pb2.Assignment) -> list[IntervalId] | None:
        """Take the layouts of ``assignment``: None when none changed, else the intervals
        retired since the last look (split, or merged back)."""
        layouts = layouts_of(assignment, self._topology)
        with self._lock:
            if layouts == self.layouts:
                return None
            before = self._current
            self.layouts = layouts
            self._current = {
                name: frozenset(layouts[name].ids() if name in layouts else range(spec.intervals))
                for name, spec in self._topology.computations.items()
            }
            self.reshaped = True
            return sorted(
                IntervalId(name, ident)
                for name, ids in before.items()
                for ident in ids - self._current[name]
            )

    def retired(self, consumer: str, interval: int) -> bool:
        """Whether ``consumer``'s ``interval`` is gone (split, or merged back): records
        for it go to the intervals that hold their keys now."""
        ids = self._current.get(consumer)
        return ids is not None and interval not in ids

    def current(self, computation: str) -> list[int]:
        """The ids of ``computation``'s intervals now."""
        return sorted(self._current[computation])


class StoreMaker:
    """Makes the store of an interval that is not yet on this node from those that are:
    a split interval's halves from its store, a merged interval's from its halves'."""

    def __init__(
        self,
        *,
        computation: str,
        base_count: int,
        store_path: Callable[[int], Path],
        store_config: StoreConfig,
        release: Callable[[int, str], int | None],
    ) -> None:
        """``release(index, reason)`` stops running an interval here and closes its store."""
        self._computation = computation
        self._base = base_count
        self._store_path = store_path
        self._config = store_config
        self._release = release
        self._lock = threading.Lock()

    def make(self, index: int) -> bool:
        """Make sure the store of interval ``index`` exists: merged from its halves' if
        they are here, else cut from the interval it was split from; False when it can
        be neither (a first interval new here)."""
        interval = KeyInterval.of_id(self._computation, index, self._base)
        halves = [self._store_path(h.id(self._base)) for h in interval.halves()]
        with self._lock:
            if self._store_path(index).is_dir():
                return True
            if all(path.is_dir() for path in halves):
                self._merge(interval)
                return True
            if index < self._base:
                return False
            self._make(index)
        return True

    def _merge(self, whole: KeyInterval) -> None:
        """The store of ``whole`` from its halves' (both here)."""
        path = self._store_path(whole.id(self._base))
        low, high = whole.halves()
        for half in (low, high):
            self._release(half.id(self._base), f"merging into {whole}")
        log.info(
            "merging %s and %s into %s", low, high, whole,
            extra={"event": "merge", "computation": self._computation,
                   "interval": whole.id(self._base)},
        )  # fmt: skip
        incoming = self._incoming(whole)
        shutil.rmtree(incoming, ignore_errors=True)
        lower = StateStore.open_rocksdb(
            self._store_path(low.id(self._base)), config=self._config, for_transactions=False
        )
        try:
            lower.checkpoint(incoming)
            epoch = lower.owner_epoch
        finally:
            lower.close()
        upper_path = self._store_path(high.id(self._base))
        merged = StateStore.open_rocksdb(incoming, config=self._config)
        try:
            upper = StateStore.open_rocksdb(upper_path, config=self._config)
            try:
                merge_into(
                    merged, upper, max(epoch, upper.owner_epoch),
                    halves=(low.id(self._base), high.id(self._base)),
                )  # fmt: skip
            finally:
                upper.close()
        finally:
            merged.close()
        fsync_directory(incoming)
        incoming.rename(path)
        fsync_directory(path.parent)
        for half in (low, high):
            shutil.rmtree(self._store_path(half.id(self._base)))
        fsync_directory(path.parent)

    def _make(self, index: int) -> None:
        path = self._store_path(index)
        if path.is_dir():
            return
        half = KeyInterval.of_id(self._computation, index, self._base)
        whole = half.whole(self._base)
        assert whole is not None  # an id past the first intervals is a half
        source = whole.id(self._base)
        source_path = self._store_path(source)
        if not source_path.is_dir() and source >= self._base:
            self._make(source)  # split again before its own halves were made
        self._release(source, f"split into {' and '.join(map(str, whole.halves()))}")
        if not source_path.is_dir():
            raise FileNotFoundError(
                f"{whole} split, but no store of it is on this node to make {half} from"
            )
        log.info(
            "splitting %s into its halves", whole,
            extra={"event": "split", "computation": self._computation, "interval": source},
        )  # fmt: skip
        halves = [h for h in whole.halves() if not self._store_path(h.id(self._base)).is_dir()]
        copies = {h: self._incoming(h) for h in halves}
        for path in copies.values():
            shutil.rmtree(path, ignore_errors=True)
        stored = StateStore.open_rocksdb(source_path, config=self._config, for_transactions=False)
        try:
            for path in copies.values():
                stored.checkpoint(path)
            epoch = stored.owner_epoch
        finally:
            stored.close()
        for half, path in copies.items():
            copy = StateStore.open_rocksdb(path, config=self._config, for_transactions=False)
            try:
                cut_to_half(copy, half, epoch, split=source)
            finally:
                copy.close()
            fsync_directory(path)
            path.rename(self._store_path(half.id(self._base)))
            fsync_directory(path.parent)
        shutil.rmtree(source_path)
        fsync_directory(source_path.parent)

    def _incoming(self, interval: KeyInterval) -> Path:
        """Where ``interval``'s store is made before it is renamed into place."""
        path = self._store_path(interval.id(self._base))
        return path.with_name(path.name + _INCOMING)
