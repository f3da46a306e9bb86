"""``OutboxLedger``: one interval's outbox, as stored and as still unacknowledged.

It knows which frames the store holds, which productions in them await an
ack (:class:`~engine._in_flight.OldestInFlight`, which also holds the
watermark back) and which frames every ack has emptied. The processor goes
through it in each of its commits:

1. :meth:`stage` puts the commit's new frames (one per destination) and the
   deletes of emptied frames in the transaction;
2. after the commit, :meth:`committed` starts tracking the new frames.

Acks (:meth:`acknowledged`) only touch memory: the deletes they make due ride
along with the next commit. Losing them in a crash only resends frames, which
receivers deduplicate.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from millrace.engine._frames import Frame, decode_frame, frame_key, frame_seq
from millrace.engine._in_flight import OldestInFlight
from millrace.engine._routing import FrameBuilder
from millrace.statestore import StateStore, Transaction

NEXT_FRAME = "outbox-next-frame"
"""Store metadata: the sequence number of the interval's next outbox frame (u64)."""
_U64 = struct.Struct(">Q")

Staged = list[tuple[bytes, Frame]]
"""The frames one transaction checkpoints, with their outbox keys."""


def next_frame(store: StateStore, stored_keys: Iterable[bytes] | None = None) -> int:
    """The sequence ``store``'s next outbox frame takes (``stored_keys``: its outbox's
    keys, when already read). Frame sequences are the interval's send positions
    (receivers forget record ids by them): they never go back, even once the outbox is
    empty, so the next one is committed with every frame."""
    stored = store.get_meta(NEXT_FRAME)
    after = _U64.unpack(stored)[0] if stored else 0
    keys = (key for key, _ in store.outbox()) if stored_keys is None else stored_keys
    for key in keys:
        after = max(after, frame_seq(key) + 1)
    return int(after)


class OutboxLedger:
    """The outbox of one interval's store; driven by the interval's one thread."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.in_flight = OldestInFlight()
        """Productions not acknowledged yet, grouped by frame."""
        self._emptied: list[bytes] = []
        """Frames whose productions are all acknowledged, to delete with the next commit."""
        frames = self._read()
        for key, frame in frames:
            self._track(key, frame)
        self._next_frame = next_frame(store, [key for key, _ in frames])
        self._through = 0
        self.pending_below = 0
        """How many frames numbered below :meth:`count_below`'s ``through`` await acks."""

    def count_below(self, through: int) -> None:
        """Count from now on the frames numbered below ``through`` (the inherited ones of
        a store made by a split or a merge) that still await acks; call before any ack."""
        self._through = through
        self.pending_below = sum(1 for key, _ in self._store.outbox() if frame_seq(key) < through)

    def pending_frames(self) -> list[Frame]:
        """The stored frames in the order they were made, as stored (to resend after a
        restart: a consumer that keeps the latest value per key must see them in order)."""
        return [frame for _, frame in self._read()]

    @property
    def has_emptied(self) -> bool:
        """True when fully acknowledged frames wait for a commit to delete them."""
        return bool(self._emptied)

    def acknowledged(self, outbox_keys: Iterable[bytes]) -> None:
        """Forget acked productions; frames they empty wait for the next :meth:`stage`."""
        emptied: list[bytes] = self.in_flight.remove_many(outbox_keys)  # type: ignore[assignment]
        self._emptied.extend(emptied)
        if self.pending_below:
            self.pending_below -= sum(1 for key in emptied if frame_seq(key) < self._through)

    def stage(
        self,
        txn: Transaction,
        built: FrameBuilder | None = None,
        skip: AbstractSet[bytes] = frozenset(),
    ) -> Staged:
        """Stage in ``txn`` the deletes of emptied frames and, from ``built``, one new frame
        per destination with every production but those in ``skip`` (acked already)."""
        for key in self._emptied:
            txn.remove_outbox(key)
        if built is None:
            return []
        in_flight = self.in_flight

        def dropped(keys: list[bytes]) -> bool:
            # An identity already in flight has its frame; another would never be deleted.
            return in_flight.tracks_any(keys) or (bool(skip) and not skip.isdisjoint(keys))

        staged = []
        for frame in built.frames(dropped):
            seq = self._next_frame
            self._next_frame += 1  # gaps after a failed commit are harmless: only order counts
            frame.positions = (seq, seq)
            txn.add_outbox(frame_key(seq), frame.encoded())
            staged.append((frame_key(seq), frame))
        if staged:
            txn.set_meta(NEXT_FRAME, _U64.pack(self._next_frame))
        return staged

    def committed(self, staged: Staged) -> None:
        """The transaction :meth:`stage` filled is committed: track its frames."""
        self._emptied.clear()
        for key, frame in staged:
            self._track(key, frame)

    def _track(self, key: bytes, frame: Frame) -> None:
        self.in_flight.add_keys(frame.outbox_keys, frame.oldest_event_time_ms, key)

    def _read(self) -> Staged:
        """The outbox's frames in production order (by sequence)."""
        frames: Staged = []
        for key, value in self._store.outbox():
            frame = decode_frame(value)
            seq = frame_seq(key)
            frame.positions = (seq, seq)
            frames.append((key, frame))
        return frames
