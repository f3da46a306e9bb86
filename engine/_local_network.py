"""``LocalNetwork``: delivery between key intervals in one process, batch by batch.

What the gRPC delivery protocol does between nodes, without sockets or
threads: a sender's frames become ``DeliveryBatch`` messages in their wire
encoding (a header, then the frames' stored bytes); a receiving interval
takes every batch queued for it in one turn of its :class:`IntervalDriver`
(a group commit), and each batch's ack goes back to its sender, which
retires what was committed or duplicate and resends the rest. The test
harness and the chaos tests drive it; the order in which batches and acks
move is theirs to choose.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from millrace.computations import IntervalId
from millrace.engine._driver import Ack, IntervalDriver
from millrace.engine._frames import Frame, encode_batch, frames_of
from millrace.engine._outcome import BatchOutcome
from millrace.engine._production_ids import Production
from millrace.wire.v1 import delivery_pb2, record_pb2


@dataclass(frozen=True, slots=True)
class InFlight:
    """One batch on its way from a sender incarnation to one destination interval."""

    sender: IntervalId | None
    """The sending interval; None for the source (records fed from outside)."""
    epoch: int
    destination: IntervalId
    """A sink stream's is ``IntervalId("sink:<stream>", 0)``."""
    data: bytes
    """The batch as the wire carries it."""
    productions: tuple[Production, ...]

    def batch(self) -> delivery_pb2.DeliveryBatch:
        """The batch as a receiver parses it."""
        batch = delivery_pb2.DeliveryBatch()
        batch.ParseFromString(self.data)
        return batch

    def settle(self, ack: Ack) -> tuple[list[bytes], list[Production]]:
        """Split by ``ack``: outbox keys done (committed, duplicate or refused for good:
        the sender stops sending them) and productions to send again."""
        done_ids = {*ack.committed_ids, *ack.duplicate_ids}
        done_ids.update(r.record_id for r in ack.rejected)
        done = [p.outbox_key for p in self.productions if p.record.record_id in done_ids]
        again = [p for p in self.productions if p.record.record_id not in done_ids]
        return done, again


class LocalNetwork:
    """Batches in flight between the intervals of one process, oldest first."""

    def __init__(self) -> None:
        self.in_flight: deque[InFlight] = deque()
        self._seq = itertools.count(1)

    def send(self, sender: IntervalId | None, epoch: int, frames: Iterable[Frame]) -> None:
        """Put each frame on the network as one batch (a frame holds one destination's
        productions of one commit)."""
        for frame in frames:
            self.in_flight.append(self.batch_of(sender, epoch, [frame]))

    def send_productions(
        self, sender: IntervalId | None, epoch: int, productions: Sequence[Production]
    ) -> None:
        """Send ``productions``: one batch per destination."""
        self.send(sender, epoch, frames_of(productions))

    def batch_of(self, sender: IntervalId | None, epoch: int, frames: Sequence[Frame]) -> InFlight:
        """The batch carrying ``frames`` (all to one destination) from ``sender``."""
        consumer, interval = frames[0].consumer, frames[0].interval
        header = delivery_pb2.DeliveryBatch(
            batch_seq=next(self._seq),
            target=record_pb2.KeyInterval(computation=consumer, index=interval),
        )
        header.sender.sender_id = "local"
        header.sender.epoch = epoch
        if sender is not None:
            header.sender.interval.computation, header.sender.interval.index = sender
        productions = tuple(p for frame in frames for p in frame.productions)
        return InFlight(
            sender, epoch, IntervalId(consumer, interval), encode_batch(header, frames), productions
        )

    def next_destination(self) -> IntervalId | None:
        """Where the oldest batch in flight goes (None: nothing in flight)."""
        return self.in_flight[0].destination if self.in_flight else None

    def take(self, destination: IntervalId) -> list[InFlight]:
        """Every batch in flight to ``destination``, oldest first, off the network."""
        taken = [m for m in self.in_flight if m.destination == destination]
        self.in_flight = deque(m for m in self.in_flight if m.destination != destination)
        return taken


def receive(
    driver: IntervalDriver, messages: Sequence[InFlight]
) -> tuple[list[tuple[InFlight, Ack]], BatchOutcome | None]:
    """One turn of ``driver`` over ``messages`` (a group commit): each message with its
    ack, and the commit's outcome (None when every batch was refused)."""
    batches = [message.batch() for message in messages]
    admission = driver.admit(batches)
    acks: dict[int, Ack] = {id(batch): ack for batch, ack in admission.refused}
    outcome = None
    if admission.accepted:
        wire_of = {
            id(batch): message.data for batch, message in zip(batches, messages, strict=True)
        }
        wires = [wire_of[id(batch)] for batch in admission.accepted]
        outcome = driver.process(admission.accepted, wires=wires)
        acks.update(
            zip(
                (id(b) for b in admission.accepted),
                driver.answer(admission.accepted, outcome),
                strict=True,
            )
        )
    return [(m, acks[id(b)]) for m, b in zip(messages, batches, strict=True)], outcome
