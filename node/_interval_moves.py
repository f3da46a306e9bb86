"""A node's side of live interval moves (``Control.MoveInterval``, ``Admin.HandOver``).

The injector's registry records that an interval moves to a node; from then on it
leases the interval only to that node. The steps, each safe to repeat after a crash
of any process:

1. The node it moves to (this class, :meth:`IntervalMoves.follow`) sees the move in
   the assignment and calls ``HandOver`` on the interval's current owner (the address
   of its lease).
2. The owner (:meth:`IntervalMoves.hand_over`) checks the move with the registry and
   streams the store's immutable files (a copy ahead, while it still runs the
   interval); then it stops running the interval (its worker fenced and stopped, its
   store closed: nothing commits there again) and streams the files written since.
3. The new node writes them down durably (``_store_transfer.py``), opens the store and
   registers the interval: the registry grants an epoch above the store's, which
   fences the old owner everywhere (receivers refuse its deliveries, its store its
   commits), and senders follow the new lease.
4. The new owner resends the outbox it took over; receivers' dedup drops what had
   arrived already. Deliveries the old owner refused while moving are retried to the
   new one.

An owner that restarts mid-move does not register the interval again (the registry
says it moved away) and still serves ``HandOver`` from its store on disk; a new node
that restarts before registering fetches the store again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from millrace.deployment.security import Security
from millrace.node._store_transfer import (
    TransferError,
    copy_ahead,
    receive_store,
    store_pieces,
)
from millrace.statestore import StateStore, StoreConfig
from millrace.wire.v1 import admin_pb2, admin_pb2_grpc, control_pb2, control_pb2_grpc, record_pb2

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """An interval's current lease, as the registry shows it."""

    node_id: str
    address: str
    epoch: int


@dataclass(frozen=True)
class Layout:
    """What the registry says about one computation's intervals."""

    moves: dict[int, str]
    """Interval -> the node it moved (or moves) to."""
    holders: dict[int, Holder]
    """Interval -> its current lease."""

    @classmethod
    def of(cls, assignment: control_pb2.Assignment, computation: str) -> Layout:
        moves = {
            m.interval.index: m.to_node_id
            for m in assignment.moves
            if m.interval.computation == computation
        }
        holders = {
            lease.interval.index: Holder(lease.node_id, lease.address, lease.epoch)
            for lease in assignment.leases
            if lease.interval.computation == computation
        }
        return cls(moves, holders)

    def to_take_over(self, node_id: str, index: int) -> bool:
        """True when ``index`` moves to ``node_id`` and another node still holds it."""
        holder = self.holders.get(index)
        return self.moves.get(index) == node_id and holder is not None and holder.node_id != node_id


def intervals_to_open(
    placed: Iterable[int], layout: Layout, node_id: str, current: Iterable[int]
) -> list[int]:
    """The intervals a starting node opens: those of the ``current`` ones (split ones
    replaced by their halves) placed on it by the deployment file or moved to it, but
    not those moved away, nor those moved to it that another node still holds (taken
    over from that node once running: :meth:`IntervalMoves.follow`)."""
    wanted = (set(placed) | {i for i, n in layout.moves.items() if n == node_id}) & set(current)
    return [
        i
        for i in sorted(wanted)
        if layout.moves.get(i, node_id) == node_id and not layout.to_take_over(node_id, i)
    ]


def is_drained(assignment: control_pb2.Assignment, node_id: str, computation: str) -> bool:
    """True when the registry drains ``node_id`` and no interval of ``computation`` is
    leased to it or moves to it (the nodes that took them registered them, so every
    hand-over from it is complete)."""
    if node_id not in assignment.draining:
        return False
    layout = Layout.of(assignment, computation)
    return node_id not in layout.moves.values() and all(
        holder.node_id != node_id for holder in layout.holders.values()
    )


def fetch_assignment(
    channel: grpc.Channel, computation: str, timeout: float = 5.0
) -> control_pb2.Assignment:
    """The registry's leases and moves of ``computation`` (raises ``grpc.RpcError``)."""
    stub = control_pb2_grpc.ControlStub(channel)
    request = control_pb2.GetAssignmentRequest(computations=[computation])
    assignment: control_pb2.Assignment = stub.GetAssignment(
        request, timeout=timeout, wait_for_ready=True
    )
    return assignment


def wait_for_assignment(channel: grpc.Channel, computation: str) -> control_pb2.Assignment:
    """:func:`fetch_assignment`, retried until the registry answers (a node starting
    before its injector waits for it); ``ValueError`` when it refuses the token."""
    backoff = 0.1
    while True:
        try:
            return fetch_assignment(channel, computation)
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ValueError(f"the injector refused: {error.details()}") from error
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)


def fetch_layout(channel: grpc.Channel, computation: str, timeout: float = 5.0) -> Layout:
    """The registry's layout of ``computation`` (raises ``grpc.RpcError``)."""
    return Layout.of(fetch_assignment(channel, computation, timeout), computation)


class IntervalMoves:
    """Takes over the intervals moved to this node; hands over those moved away.

    ``host(index, store)`` registers an opened store's interval and runs it (False:
    the registry refused it, and the store is the caller's to close);
    ``release(index)`` stops running it and closes its store (idempotent);
    ``hosted()`` the indexes running here.
    """

    def __init__(
        self,
        *,
        node_id: str,
        computation: str,
        data_dir: Path,
        store_config: StoreConfig,
        registry: grpc.Channel,
        security: Security,
        host: Callable[[int, StateStore], bool],
        release: Callable[[int, str], int | None],
        hosted: Callable[[], set[int]],
        make_store: Callable[[int], bool] = lambda index: False,
    ) -> None:
        """``make_store(index)``: make the store of an interval split or merged here
        from the stores it is made of (False: it is made of none here)."""
        self._node_id = node_id
        self._computation = computation
        self._data_dir = data_dir
        self._store_config = store_config
        self._registry = registry
        self._security = security
        self._host = host
        self._release = release
        self._hosted = hosted
        self._make_store = make_store
        self._lock = threading.Lock()
        self._taking: set[int] = set()
        self._stopping = threading.Event()

    def store_path(self, index: int) -> Path:
        """Where interval ``index``'s store lives on this node."""
        return self._data_dir / self._computation / str(index)

    def stop(self) -> None:
        """Stop taking over (a transfer under way is abandoned: it is retried later)."""
        self._stopping.set()

    # -- the node it moves to ------------------------------------------------------

    def follow(self, assignment: control_pb2.Assignment) -> None:
        """Start taking over every interval moved here that another node still holds."""
        layout = Layout.of(assignment, self._computation)
        hosted = self._hosted()
        for index, node_id in layout.moves.items():
            if node_id != self._node_id or index in hosted:
                continue
            with self._lock:
                if index in self._taking or self._stopping.is_set():
                    continue
                self._taking.add(index)
            threading.Thread(
                target=self._take_over, args=(index,), name=f"take-over-{index}", daemon=True
            ).start()

    def _take_over(self, index: int) -> None:
        backoff = 0.2
        try:
            while not self._stopping.is_set():
                try:
                    if self._take_over_once(index):
                        return
                except (grpc.RpcError, TransferError, OSError) as exc:
                    log.warning(
                        "taking over %s/%s failed, retrying: %s",
                        self._computation, index, _describe(exc),
                        extra={"event": "move_retry", "computation": self._computation,
                               "interval": index},
                    )  # fmt: skip
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 3.0)
        finally:
            with self._lock:
                self._taking.discard(index)

    def _take_over_once(self, index: int) -> bool:
        """One attempt; True when done (hosted here, or no longer moving here)."""
        layout = fetch_layout(self._registry, self._computation)
        if layout.moves.get(index) != self._node_id:
            return True  # moved elsewhere meanwhile: not ours to take
        holder = layout.holders.get(index)
        path = self.store_path(index)
        if holder is not None and holder.node_id != self._node_id:
            log.info(
                "taking over %s/%s from %s at %s (epoch %d)",
                self._computation, index, holder.node_id, holder.address, holder.epoch,
                extra={"event": "move_transfer", "computation": self._computation,
                       "interval": index},
            )  # fmt: skip
            with self._security.open_channel(holder.address) as channel:
                stub = admin_pb2_grpc.AdminStub(channel)
                interval = record_pb2.KeyInterval(computation=self._computation, index=index)
                # Ahead of the fence, while the owner still runs the interval: its
                # immutable files, the bulk of a big store. Then the hand-over proper:
                # the owner stops, and only what was written since crosses.
                ahead = admin_pb2.HandOverRequest(
                    interval=interval, to_node_id=self._node_id, before_fence=True
                )
                have = copy_ahead(stub.HandOver(ahead, timeout=3600), path)
                request = admin_pb2.HandOverRequest(
                    interval=interval, to_node_id=self._node_id, have=have
                )
                receive_store(stub.HandOver(request, timeout=3600), path, ahead=True)
        elif holder is None and not path.is_dir():
            # Never leased: split or merged here, or a first interval new.
            self._make_store(index)
        store = StateStore.open_rocksdb(path, config=self._store_config)
        try:
            if self._host(index, store):
                return True
        except BaseException:
            store.close()
            raise
        store.close()
        return True  # the registry refused it: it moved on

    # -- the node it moves from ----------------------------------------------------

    def hand_over(
        self, index: int, to_node_id: str, *, before_fence: bool = False, have: Iterable[str] = ()
    ) -> Iterator[admin_pb2.StoreFilePiece]:
        """Check the move with the registry, stop running ``index`` and stream its store
        (but the immutable files named in ``have``). ``before_fence``: stream only the
        immutable files, and keep running it.

        Raises ``PermissionError`` when the registry does not move it to ``to_node_id``,
        ``FileNotFoundError`` when this node has no store of it."""
        layout = fetch_layout(self._registry, self._computation)
        if layout.moves.get(index) != to_node_id:
            raise PermissionError(
                f"the registry does not move {self._computation}/{index} to {to_node_id}"
            )
        holder = layout.holders.get(index)
        if holder is not None and holder.node_id != self._node_id:
            raise PermissionError(
                f"{self._computation}/{index} is leased to {holder.node_id}, not to this node"
            )
        path = self.store_path(index)
        if before_fence:
            if not path.is_dir():
                raise FileNotFoundError(f"no store of {self._computation}/{index} here")
            yield from store_pieces(path, 0, only_immutable=True)
            return
        log.info(
            "handing %s/%s over to %s", self._computation, index, to_node_id,
            extra={"event": "move_hand_over", "computation": self._computation,
                   "interval": index},
        )  # fmt: skip
        with self._lock:
            epoch = self._release(index, f"moving to {to_node_id}")
        if not path.is_dir():
            raise FileNotFoundError(f"no store of {self._computation}/{index} here")
        # Not running here (restarted mid-move): the store on disk as the crash left it
        # (RocksDB replays its log when the new node opens it; the epoch is read there).
        # Nothing writes the directory from here on: the store is closed and this node
        # never opens an interval that moved away.
        yield from store_pieces(path, 0 if epoch is None else epoch, have=have)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError):
        return f"{exc.code()}: {exc.details()}"
    return str(exc)
