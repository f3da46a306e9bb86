"""``DownstreamSender``: delivers productions to one address until each one is acknowledged.

One bidirectional ``Delivery.Deliver`` stream per destination address. The
sender queues :class:`~engine._production_ids.Frame` s per (origin interval,
target interval) and sends whole frames, up to ``max_batch`` records and
``FRAME_BYTES`` per batch (a bigger frame goes alone): a frame's encoding is
sent as it is, after a small header, so records are not copied or re-encoded.
It keeps at most ``max_inflight`` batches unacked (backpressure: :meth:`submit`
blocks once ``max_pending`` productions are queued, so a slow consumer slows
its producers and memory stays bounded), and resends whatever an ack does not
confirm after ``retry_s``. A broken stream is reopened with exponential
backoff and every unacknowledged batch is resent; the receiver's dedup makes
resends harmless because production ids never change.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc

from millrace.delivery._positions import Positions, span_of
from millrace.deployment import KEEPALIVE_OPTIONS
from millrace.engine import FRAME_BYTES, Frame, Production, encode_batch, frames_of
from millrace.wire.v1 import delivery_pb2, record_pb2

log = logging.getLogger(__name__)

_PERMANENT = frozenset(
    {delivery_pb2.UNKNOWN_STREAM, delivery_pb2.WRONG_INTERVAL, delivery_pb2.MALFORMED_RECORD}
)
MAX_MESSAGE_BYTES = 64 << 20
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Clients and servers (which use these options too) keep the one keepalive policy.
    *KEEPALIVE_OPTIONS,
]
DELIVER_METHOD = "/millrace.wire.v1.Delivery/Deliver"
STREAM_DEADLINE_S = 600.0
"""Deadline of every long-lived stream (Deliver, the watches): it is then reopened, so no
call can hang forever on a server that accepted it and stopped answering."""


@dataclass(frozen=True, slots=True)
class Origin:
    """The sending interval and its epoch (``computation`` empty for the source).

    ``sequence`` names what the positions of its frames count, when not the
    interval's outbox frames: ``"source:<stream>"`` for a source stream's offsets.
    """

    computation: str
    interval: int
    epoch: int
    sequence: str = ""


class SenderCallbacks(Protocol):
    """How a sender reports back to the intervals that own the productions."""

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        """Productions were committed or found duplicate downstream."""

    def fenced(self, origin: Origin, message: str) -> None:
        """The receiver knows a newer epoch of ``origin``: it is a zombie."""

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        """The receiver will never take ``production`` (routing or payload bug)."""


_Group = tuple[Origin, str, int]  # origin, consumer, target interval


def insecure_channel(address: str) -> grpc.Channel:
    """The default channel factory: plaintext, no token."""
    return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)


class DownstreamSender:
    """Delivers to one address; thread-safe :meth:`submit`."""

    def __init__(
        self,
        address: str,
        *,
        sender_id: str,
        callbacks: SenderCallbacks,
        max_batch: int = 1000,
        max_inflight: int = 8,
        max_pending: int = 50_000,
        retry_s: float = 0.2,
        ack_timeout_s: float = 30.0,
        channel_factory: Callable[[str], grpc.Channel] = insecure_channel,
    ) -> None:
        self.address = address
        self._channel_factory = channel_factory
        self._sender_id = sender_id
        self._callbacks = callbacks
        self._max_batch = max_batch
        self._max_inflight = max_inflight
        self._max_pending = max_pending
        self._retry_s = retry_s
        self._ack_timeout_s = ack_timeout_s
        self._cond = threading.Condition()
        self._pending: dict[_Group, deque[Frame]] = {}
        self._held: dict[_Group, Positions] = {}
        """Per group, the first positions of the frames not yet acknowledged."""
        self._queued = 0
        self._inflight: dict[int, tuple[_Group, list[Frame], float]] = {}
        self._retries: list[tuple[float, int, _Group, list[Frame]]] = []
        self._seq = itertools.count(1)
        self._generation = 0
        self._stopping = False
        self._call: grpc.Future | None = None
        self._thread = threading.Thread(target=self._run, name=f"sender-{address}", daemon=True)
        self.retried = 0
        self.sent_batches = 0

    # -- producer side ------------------------------------------------------

    def submit(self, origin: Origin, productions: Sequence[Production]) -> None:
        """Queue productions; blocks while ``max_pending`` are already queued."""
        self.submit_frames(origin, frames_of(productions))

    def submit_frames(self, origin: Origin, frames: Sequence[Frame]) -> None:
        """Queue frames (their order is kept per destination); blocks while
        ``max_pending`` productions are already queued."""
        with self._cond:
            while self._queued >= self._max_pending and not self._stopping:
                self._cond.wait(0.5)
            for frame in frames:
                group = (origin, frame.consumer, frame.interval)
                queue = self._pending.get(group)
                if queue is None:
                    queue = self._pending[group] = deque()
                    self._held[group] = Positions()
                queue.append(frame)
                self._held[group].add(frame.positions)
                self._queued += len(frame)
            self._cond.notify_all()

    @property
    def queued(self) -> int:
        """Productions not yet acknowledged (queued, in flight or awaiting a retry)."""
        return self._queued

    def start(self) -> None:
        """Start delivering."""
        self._thread.start()

    def retarget(self, address: str) -> None:
        """Deliver to ``address`` from now on (the destination's owner moved): the stream to
        the old address ends and everything unacknowledged is resent to the new one."""
        with self._cond:
            if address == self.address:
                return
            log.info("delivery to %s moves to %s", self.address, address)
            self.address = address
            self._generation += 1
            call = self._call
            self._cond.notify_all()
        if call is not None:
            call.cancel()

    def forget(self, origin: Origin) -> None:
        """Stop sending ``origin``'s productions (it was fenced): they stay in its outbox."""
        with self._cond:
            for group in [g for g in self._pending if g[0] == origin]:
                self._queued -= sum(len(f) for f in self._pending.pop(group))
                self._held.pop(group, None)
            kept = [r for r in self._retries if r[2][0] != origin]
            for _, _, _, frames in (r for r in self._retries if r[2][0] == origin):
                self._queued -= sum(len(f) for f in frames)
            self._retries = kept
            heapq.heapify(self._retries)
            self._cond.notify_all()

    def take_all(self, timeout: float = 2.0) -> list[tuple[Origin, list[Frame]]]:
        """Stop delivering and hand back every frame not acknowledged yet (queued, in
        flight, awaiting a retry), per origin in the order first queued: its destination
        is gone (split), so they go elsewhere. An ack that comes later is ignored."""
        with self._cond:
            taken: dict[Origin, list[Frame]] = {}
            for _, (group, frames, _) in sorted(self._inflight.items()):
                taken.setdefault(group[0], []).extend(frames)
            for _, _, group, frames in sorted(self._retries):
                taken.setdefault(group[0], []).extend(frames)
            for group, queue in self._pending.items():
                taken.setdefault(group[0], []).extend(queue)
            self._inflight.clear()
            self._retries.clear()
            self._pending.clear()
            self._held.clear()
            self._queued = 0
            self._stopping = True
            call = self._call
            self._cond.notify_all()
        if call is not None:
            call.cancel()  # the stream's thread waits for acks: end it now
        self._thread.join(timeout)
        return list(taken.items())

    def stop(self, timeout: float = 2.0) -> None:
        """Stop delivering; unacknowledged productions stay in their outboxes."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # -- the stream -----------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.05
        while not self._stopping:
            with self._cond:
                self._generation += 1
                generation = self._generation
                address = self.address
            channel = self._channel_factory(address)
            try:
                # Requests are already bytes (see _requests): no request serializer.
                deliver = channel.stream_stream(
                    DELIVER_METHOD, response_deserializer=delivery_pb2.DeliveryAck.FromString
                )
                acks = deliver(self._requests(generation), timeout=STREAM_DEADLINE_S)
                with self._cond:
                    self._call = acks
                for ack in acks:
                    self._on_ack(ack)
                    backoff = 0.05
            except grpc.RpcError as error:
                if not self._stopping:
                    log.debug("delivery to %s broke: %s", address, error)
            finally:
                with self._cond:
                    self._call = None
                    moved = address != self.address
                self._requeue_inflight()
                channel.close()
            if moved:
                backoff = 0.05
            elif not self._stopping:
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    def _requests(self, generation: int) -> Iterator[bytes]:
        """Serialized ``DeliveryBatch`` es: a header with the batch's own fields, then the
        frames' encodings (concatenated messages parse as one: records append)."""
        while True:
            with self._cond:
                taken = self._next_batch(generation)
                if taken is None:
                    return
                seq, (origin, consumer, interval), frames = taken
                held = self._held.get((origin, consumer, interval))
                floor = None if held is None else held.floor()
            header = delivery_pb2.DeliveryBatch(
                batch_seq=seq,
                target=record_pb2.KeyInterval(computation=consumer, index=interval),
            )
            header.sender.sender_id = self._sender_id
            header.sender.epoch = origin.epoch
            if origin.computation:
                header.sender.interval.computation = origin.computation
                header.sender.interval.index = origin.interval
            if floor is not None and all(f.positions is not None for f in frames):
                progress = header.sender.progress
                progress.sequence = origin.sequence
                progress.floor = floor
                progress.first = min(f.positions[0] for f in frames if f.positions)
                progress.last = max(f.positions[1] for f in frames if f.positions)
            self.sent_batches += 1
            yield encode_batch(header, frames)

    def _next_batch(self, generation: int) -> tuple[int, _Group, list[Frame]] | None:
        """Under the lock: wait for room and work; None when this stream must end."""
        while True:
            if self._stopping or generation != self._generation:
                return None
            now = time.monotonic()
            self._expire_unanswered(now)
            while self._retries and self._retries[0][0] <= now:
                _, _, group, frames = heapq.heappop(self._retries)
                self._pending.setdefault(group, deque()).extendleft(reversed(frames))
            if len(self._inflight) < self._max_inflight:
                for group, queue in self._pending.items():
                    if queue:
                        frames = [queue.popleft()]
                        count, size = len(frames[0]), len(frames[0].encoded())
                        while queue:
                            more, more_size = len(queue[0]), len(queue[0].encoded())
                            if count + more > self._max_batch or size + more_size > FRAME_BYTES:
                                break
                            count, size = count + more, size + more_size
                            frames.append(queue.popleft())
                        seq = next(self._seq)
                        self._inflight[seq] = (group, frames, now)
                        return seq, group, frames
            wait = 0.1
            if self._retries:
                wait = max(0.001, min(wait, self._retries[0][0] - now))
            self._cond.wait(wait)

    def _expire_unanswered(self, now: float) -> None:
        """Batches unanswered for ``ack_timeout_s`` are resent (a late ack is then ignored)."""
        expired = [
            s for s, (_, _, sent) in self._inflight.items() if now - sent > self._ack_timeout_s
        ]
        self._put_back(expired)

    def _on_ack(self, ack: delivery_pb2.DeliveryAck) -> None:
        refused: list[tuple[Production, int, str]] = []
        fenced_message = ""
        with self._cond:
            entry = self._inflight.pop(ack.batch_seq, None)
            if entry is None:
                return
            group, frames, _ = entry
            total = sum(len(frame) for frame in frames)
            unanswered: list[Production] = []
            if not ack.rejected and len(ack.committed_ids) + len(ack.duplicate_ids) == total:
                # The common case: the receiver answered every record.
                done = [key for frame in frames for key in frame.outbox_keys]
            else:
                items = [p for frame in frames for p in frame.productions]
                answers = _sort_answers(ack, items)
                done = [p.outbox_key for p in answers[0]]
                _, unanswered, refused, fenced_message = answers
            held = self._held.setdefault(group, Positions())
            for frame in frames:
                held.remove(frame.positions)
            if unanswered:
                self.retried += len(unanswered)
                due = time.monotonic() + self._retry_s
                again = frames_of(unanswered)
                span = span_of(frames)
                for frame in again:
                    frame.positions = span  # as wide as the batch's: a floor never passes them
                    held.add(span)
                heapq.heappush(self._retries, (due, next(self._seq), group, again))
            self._queued -= total - len(unanswered)
            self._cond.notify_all()
        origin = group[0]
        if done:
            self._callbacks.acked(origin, done)
        for production, reason, message in refused:
            self._callbacks.refused(origin, production, reason, message)
        if fenced_message:
            self._callbacks.fenced(origin, fenced_message)

    def _requeue_inflight(self) -> None:
        with self._cond:
            self._put_back(list(self._inflight))
            self._generation += 1
            self._cond.notify_all()

    def _put_back(self, seqs: list[int]) -> None:
        """Under the lock: return in-flight batches to the front of their queues, in the
        order they were first sent (a consumer keeping the latest value per key needs it)."""
        for seq in sorted(seqs, reverse=True):
            group, frames, _ = self._inflight.pop(seq)
            self.retried += sum(len(frame) for frame in frames)
            self._pending.setdefault(group, deque()).extendleft(reversed(frames))


def _sort_answers(
    ack: delivery_pb2.DeliveryAck, items: list[Production]
) -> tuple[list[Production], list[Production], list[tuple[Production, int, str]], str]:
    """Split a batch by its ack: done (committed or duplicate), unanswered (to resend),
    refused for good (with reason and message), and the message of a fencing if any."""
    by_id = {p.record.record_id: p for p in items}
    done = [by_id.pop(rid) for rid in (*ack.committed_ids, *ack.duplicate_ids) if rid in by_id]
    refused: list[tuple[Production, int, str]] = []
    fenced_message = ""
    for rejection in ack.rejected:
        production = by_id.get(rejection.record_id)
        if production is None:
            continue
        if rejection.reason == delivery_pb2.STALE_SENDER_EPOCH:
            # Kept for a retry: the origin stops sending only once it is fenced for sure.
            fenced_message = rejection.message
        elif rejection.reason in _PERMANENT:
            by_id.pop(rejection.record_id)
            refused.append((production, rejection.reason, rejection.message))
    return done, list(by_id.values()), refused, fenced_message
