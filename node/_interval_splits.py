"""A node's side of live splits (``Control.SplitInterval``).

The registry records that an interval splits: the computation's layout changes, the
interval is retired and its two halves are placed on the node that held it. That node
(:func:`make_halves`, called when it takes the halves over) stops running the
interval, copies its store once per half (RocksDB checkpoints) and cuts each copy down
to its half (``engine/_interval_halves.py``), then registers each half at an epoch
above the interval's and runs it. Each step is safe to repeat after a crash: a half's
store appears whole or not at all (made beside it, then renamed), and the interval's
store is deleted only once both halves' are there.

Every node follows the layouts of all computations (:class:`SplitLayouts`): its
processors route their productions by them, and what its senders still held for a
retired interval is routed again, to the halves (``engine.reroute``).
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from millrace.computations import KeyInterval, Layout, Topology
from millrace.deployment import fsync_directory
from millrace.engine._interval_halves import cut_to_half
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import control_pb2

log = logging.getLogger(__name__)

_INCOMING = ".incoming"


def layouts_of(assignment: control_pb2.Assignment, topology: Topology) -> dict[str, Layout]:
    """The layout of every computation with split intervals, from an assignment."""
    ids: dict[str, list[int]] = {}
    for interval in assignment.layout:
        ids.setdefault(interval.computation, []).append(interval.index)
    layouts = {}
    for name, found in ids.items():
        spec = topology.computations.get(name)
        if spec is not None:
            shares = (KeyInterval.of_id(name, i, spec.intervals) for i in found)
            layouts[name] = Layout(name, spec.intervals, shares)
    return layouts


class SplitLayouts:
    """The layouts a node routes by (thread-safe): the first intervals of each
    computation until the assignment says it split."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._lock = threading.Lock()
        self.layouts: dict[str, Layout] = {}
        """Per computation with split intervals, its intervals now."""
        self._retired: frozenset[tuple[str, int]] = frozenset()

    def follow(self, assignment: control_pb2.Assignment) -> list[tuple[str, int]] | None:
        """Take the layouts of ``assignment``: None when none changed, else the intervals
        retired since the last look."""
        layouts = layouts_of(assignment, self._topology)
        with self._lock:
            if layouts == self.layouts:
                return None
            before = self._retired
            self.layouts = layouts
            self._retired = frozenset(
                (name, ident) for name, layout in layouts.items() for ident in layout.split_ids()
            )
            return sorted(self._retired - before)

    def retired(self, consumer: str, interval: int) -> bool:
        """Whether ``consumer``'s ``interval`` was split (records go to its halves)."""
        return (consumer, interval) in self._retired

    def current(self, computation: str) -> list[int]:
        """The ids of ``computation``'s intervals now."""
        layout = self.layouts.get(computation)
        if layout is not None:
            return layout.ids()
        return list(range(self._topology.computations[computation].intervals))


class HalfMaker:
    """Makes the stores of a split interval's halves on the node that held it."""

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
        """Make sure the store of half ``index`` exists (made from the interval it was
        split from, whose store must be here); False when ``index`` is not a half."""
        if index < self._base:
            return False
        with self._lock:
            self._make(index)
        return True

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
        for each in whole.halves():
            self._cut_copy(source_path, each)
        shutil.rmtree(source_path)
        fsync_directory(source_path.parent)

    def _cut_copy(self, source_path: Path, half: KeyInterval) -> None:
        """The store of ``half``: a checkpoint of the interval's, cut to the half."""
        path = self._store_path(half.id(self._base))
        if path.is_dir():
            return
        incoming = path.with_name(path.name + _INCOMING)
        shutil.rmtree(incoming, ignore_errors=True)
        source = StateStore.open_rocksdb(source_path, config=self._config)
        try:
            source.checkpoint(incoming)
            epoch = source.owner_epoch
        finally:
            source.close()
        copy = StateStore.open_rocksdb(incoming, config=self._config)
        try:
            cut_to_half(copy, half, epoch)
        finally:
            copy.close()
        fsync_directory(incoming)
        incoming.rename(path)
        fsync_directory(path.parent)
