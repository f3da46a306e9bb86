"""``IntervalDriver``: one key interval's turn, the same wherever it runs.

A turn takes the delivery batches queued for the interval (all of them at
once: a group commit), admits or refuses each, processes the admitted ones
in ONE commit, and builds each batch's ``DeliveryAck``. Timers, acks from
downstream, refusals, watermarks and fences go through it too. The node's
worker thread drives it over gRPC (acking after the WAL sync), the test
harness and the chaos tests over :class:`~engine.LocalNetwork`; it has no
threads, no clocks and no I/O but the interval's store.

Admission, in order: a batch for a newer epoch of this interval than ours is
refused NOT_OWNER (epochs come from the ownership registry, never from a
message: the caller asks the registry, see :attr:`Admission.ask_registry`);
a batch for another interval NOT_OWNER; a sender epoch the registry never
granted UNKNOWN_SENDER_EPOCH (never adopted); a sender epoch older than one
already seen from that sender STALE_SENDER_EPOCH (a zombie).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from millrace.engine._frames import Frame
from millrace.engine._outcome import BatchOutcome
from millrace.engine._processor import IntervalProcessor
from millrace.engine._production_ids import Production
from millrace.engine._received import UndecodableRequestError
from millrace.statestore import MAX_EPOCH, SenderProgress
from millrace.wire.v1 import delivery_pb2

Ack = delivery_pb2.DeliveryAck
Batch = delivery_pb2.DeliveryBatch
SenderEpochCheck = Callable[[str, int, int], bool]
"""``(computation, interval, epoch) -> bool``: False for a sender epoch the ownership
registry never granted (forged, or newer than this receiver knows yet)."""


def any_valid_epoch(computation: str, interval: int, epoch: int) -> bool:
    """The check without a registry: any epoch below the limit."""
    return 0 <= epoch < MAX_EPOCH


@dataclass(slots=True)
class Admission:
    """Which batches of a turn are processed and which are refused (with their acks)."""

    accepted: list[Batch] = field(default_factory=list)
    refused: list[tuple[Batch, Ack]] = field(default_factory=list)
    ask_registry: bool = False
    """A batch claimed a newer epoch of this interval: ask the registry whether a newer
    owner exists (only its answer fences this interval)."""


class IntervalDriver:
    """Drives one :class:`IntervalProcessor`; every call must come from one thread."""

    def __init__(
        self, processor: IntervalProcessor, *, sender_epoch_ok: SenderEpochCheck = any_valid_epoch
    ) -> None:
        self.processor = processor
        self._sender_epoch_ok = sender_epoch_ok
        self.fenced_reason = ""

    @property
    def fenced(self) -> bool:
        """True once this interval has lost ownership (it commits nothing more)."""
        return bool(self.fenced_reason)

    @property
    def epoch(self) -> int:
        """The epoch acks carry: this interval's, or 0 once fenced."""
        return 0 if self.fenced else self.processor.epoch

    # -- deliveries ---------------------------------------------------------------

    def admit(self, batches: Sequence[Batch]) -> Admission:
        """Split a turn's batches into those to process and those refused."""
        admission = Admission()
        for batch in batches:
            refusal = self._refusal_of(batch, admission)
            if refusal is None:
                admission.accepted.append(batch)
            else:
                admission.refused.append((batch, refusal))
        return admission

    def _refusal_of(self, batch: Batch, admission: Admission) -> Ack | None:
        processor = self.processor
        if self.fenced:
            return self.refuse(batch, delivery_pb2.NOT_OWNER, self.fenced_reason)
        target, sender = batch.target, batch.sender
        if batch.target_epoch > processor.epoch:
            admission.ask_registry = True
            return self.refuse(
                batch,
                delivery_pb2.NOT_OWNER,
                f"the batch is for epoch {batch.target_epoch} of this interval; this node "
                f"holds epoch {processor.epoch} and asks the registry",
            )
        if target.computation != processor.name or target.index != processor.interval:
            message = f"this node does not host {target.computation}/{target.index}"
            return self.refuse(batch, delivery_pb2.NOT_OWNER, message)
        name, index, epoch = sender.interval.computation, sender.interval.index, sender.epoch
        if not name:
            return None  # the injector's forwarder: no sender epoch
        if not self._sender_epoch_ok(name, index, epoch):
            message = (
                f"{name}/{index} epoch {epoch} was never granted by the ownership registry "
                "(as far as this node knows)"
            )
            return self.refuse(batch, delivery_pb2.UNKNOWN_SENDER_EPOCH, message)
        if not processor.accept_sender(name, index, epoch):
            message = f"{name}/{index} epoch {epoch} is stale: a newer owner has delivered here"
            return self.refuse(batch, delivery_pb2.STALE_SENDER_EPOCH, message)
        return None

    def process(
        self,
        batches: Sequence[Batch],
        *,
        wires: Sequence[bytes] | None = None,
        send_first: Callable[[list[Production]], set[bytes]] | None = None,
        durable: bool = True,
    ) -> BatchOutcome:
        """Process the admitted ``batches`` in one commit (see
        :meth:`IntervalProcessor.process_records`). ``wires``: the batches as they
        arrived (serialized), whose records are read natively; without them the
        parsed batches are serialized again for it."""
        processor = self.processor
        if wires is None:
            wires = [batch.SerializeToString() for batch in batches]
        try:
            received = processor.received(wires)
        except UndecodableRequestError:
            # protobuf parsed them, so its own bytes of them decode.
            received = processor.received([batch.SerializeToString() for batch in batches])
        marks = [mark for batch in batches if (mark := sender_progress(batch)) is not None]
        return processor.process_records(
            received, send_first=send_first, durable=durable, progress=marks
        )

    def answer(self, batches: Sequence[Batch], outcome: BatchOutcome) -> list[Ack]:
        """Each batch's ack for one commit: committed ids, duplicates and rejections; a
        record in none of them was not processed and its sender retries it. They carry
        the epoch the commit was made at, and whether it noted the sender's progress."""
        epoch = self.processor.epoch
        total = sum(len(batch.records) for batch in batches)
        acks = []
        if len(outcome.committed) == total:  # the common case: all of them new, in order
            start = 0
            for batch in batches:
                end = start + len(batch.records)
                ack = Ack(batch_seq=batch.batch_seq, receiver_epoch=epoch)
                ack.progress_noted = batch.sender.HasField("progress")
                ack.committed_ids.extend(outcome.committed[start:end])
                start = end
                acks.append(ack)
            return acks
        committed, duplicates = set(outcome.committed), set(outcome.duplicates)
        rejected = {rid: (reason, message) for rid, reason, message in outcome.rejected}
        for batch in batches:
            ack = Ack(batch_seq=batch.batch_seq, receiver_epoch=epoch)
            ack.progress_noted = batch.sender.HasField("progress")
            for record in batch.records:
                rid = record.record_id
                if rid in committed:
                    ack.committed_ids.append(rid)
                elif rid in duplicates:
                    ack.duplicate_ids.append(rid)
                elif rid in rejected:
                    code, detail = rejected[rid]
                    ack.rejected.add(record_id=rid, reason=code, message=detail)
            acks.append(ack)
        return acks

    def refuse(self, batch: Batch, reason: int, message: str) -> Ack:
        """An ack rejecting every record of ``batch`` for ``reason``."""
        return refusal(batch, reason, message, self.epoch)

    def unprocessed(self, batch: Batch) -> Ack:
        """An ack listing nothing (the commit failed): the sender retries every record."""
        return Ack(batch_seq=batch.batch_seq, receiver_epoch=self.epoch)

    # -- everything else of a turn ------------------------------------------------

    def fire_timers(self, *, durable: bool = True, limit: int = 1000) -> BatchOutcome:
        """Fire due timers in one commit (call again while it fires ``limit``)."""
        return self.processor.fire_timers(limit, durable=durable)

    def acknowledged(self, outbox_keys: Sequence[bytes], *, flush: bool = True) -> None:
        """Downstream acked these productions (their frames are deleted with the next
        commit, or now with ``flush``)."""
        self.processor.acknowledge(outbox_keys, flush=flush)

    def refused(self, production: Production, reason: str) -> None:
        """Downstream will never take ``production``: dead-letter it here."""
        if not self.fenced:
            self.processor.refused(production, reason)

    def advance_watermark(self, low_watermark_ms: int) -> None:
        """A new input low watermark (event-time timers below it become due)."""
        self.processor.advance_watermark(low_watermark_ms)

    def fence(self, epoch: int, reason: str) -> None:
        """The registry confirmed a newer owner: persist its epoch and stop committing."""
        if not self.fenced:
            self.processor.store.claim_epoch(max(epoch, self.processor.epoch + 1))
            self.lost(reason)

    def lost(self, reason: str) -> None:
        """Ownership is gone (a commit was fenced by the store): stop committing."""
        self.fenced_reason = self.fenced_reason or reason or "fenced"

    def resend(self) -> list[Frame]:
        """Every stored frame not fully acked, in production order (after a restart)."""
        return self.processor.pending_frames()


def refusal(batch: Batch, reason: int, message: str, epoch: int) -> Ack:
    """An ack rejecting every record of ``batch`` for ``reason``; ``epoch`` 0 when the
    receiver does not own the target."""
    ack = Ack(batch_seq=batch.batch_seq, receiver_epoch=epoch)
    for record in batch.records:
        ack.rejected.add(record_id=record.record_id, reason=reason, message=message)
    return ack


def sender_progress(batch: Batch) -> SenderProgress | None:
    """What ``batch`` says of its sender's progress, for the dedup index (None: unnumbered).

    The sender is named by its interval (empty for the injector) and the sequence
    its positions count, not by its epoch: a restarted sender resends its outbox
    frames at their positions. A batch without records may tell the floor of an
    interval of the sender's computation that it retired (``progress.retired``):
    the mark is that interval's.
    """
    sender = batch.sender
    if not sender.HasField("progress"):
        return None
    progress = sender.progress
    index = sender.interval.index
    retired = progress.retired
    if (
        not batch.records
        and retired.computation
        and retired.computation == sender.interval.computation
    ):
        index = retired.index
    name = b"%s\x00%d\x00%s" % (
        sender.interval.computation.encode(),
        index,
        progress.sequence.encode(),
    )
    return SenderProgress(name, progress.floor, progress.last)
