"""What a node answers a delivery: one ``DeliveryAck`` per batch, after its commit.

Every record of a batch is in at most one list of its ack: committed (new, or
dead-lettered), duplicate, or rejected with a reason; a record in none of them
was not processed and the sender retries it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from computations._outcome import BatchOutcome
from millrace.wire.v1 import delivery_pb2
from statestore import SenderProgress

Ack = delivery_pb2.DeliveryAck


@dataclass(frozen=True, slots=True)
class DeliveryWork:
    """A batch from a sender and where to send its ack."""

    batch: delivery_pb2.DeliveryBatch
    reply: Callable[[Ack], None]


def answer(deliveries: list[DeliveryWork], outcome: BatchOutcome, epoch: int) -> None:
    """Ack each delivery of one commit: its committed ids, duplicates and rejections."""
    total = sum(len(work.batch.records) for work in deliveries)
    if len(outcome.committed) == total:  # the common case: all of them new, in order
        start = 0
        for work in deliveries:
            end = start + len(work.batch.records)
            ack = Ack(batch_seq=work.batch.batch_seq, receiver_epoch=epoch)
            ack.committed_ids.extend(outcome.committed[start:end])
            start = end
            work.reply(ack)
        return
    committed, duplicates = set(outcome.committed), set(outcome.duplicates)
    rejected = {rid: (reason, message) for rid, reason, message in outcome.rejected}
    for work in deliveries:
        ack = Ack(batch_seq=work.batch.batch_seq, receiver_epoch=epoch)
        for record in work.batch.records:
            rid = record.record_id
            if rid in committed:
                ack.committed_ids.append(rid)
            elif rid in duplicates:
                ack.duplicate_ids.append(rid)
            elif rid in rejected:
                code, detail = rejected[rid]
                ack.rejected.add(record_id=rid, reason=code, message=detail)
        work.reply(ack)


def refusal(batch: delivery_pb2.DeliveryBatch, reason: int, message: str, epoch: int) -> Ack:
    """An ack rejecting every record of ``batch`` for ``reason``; ``epoch`` 0 when the
    receiver does not own the target."""
    ack = Ack(batch_seq=batch.batch_seq, receiver_epoch=epoch)
    for record in batch.records:
        ack.rejected.add(record_id=record.record_id, reason=reason, message=message)
    return ack


def sender_progress(batch: delivery_pb2.DeliveryBatch) -> SenderProgress | None:
    """What ``batch`` says of its sender's progress, for the dedup index (None: unnumbered).

    The sender is named by its interval (empty for the injector) and the sequence
    its positions count, not by its epoch: a restarted sender resends its outbox
    frames at their positions.
    """
    sender = batch.sender
    if not sender.HasField("progress"):
        return None
    progress = sender.progress
    name = b"%s\x00%d\x00%s" % (
        sender.interval.computation.encode(),
        sender.interval.index,
        progress.sequence.encode(),
    )
    return SenderProgress(name, progress.floor, progress.last)
