"""``IntervalWorker``: the one thread that drives one key interval's processor.

Its loop, for everything queued since the last turn (group commit):

1. apply acknowledgements from downstream (fully acked frames are deleted
   with the next commit);
2. ``process_records`` over every queued delivery at once: dedup, user
   code, ONE atomic commit, not yet synced;
3. report the interval's oldest work to the watermark authority *before*
   acking if it moved earlier, and hold that batch's acks until the
   authority has accepted the report (so no sender can drop its hold on a
   timestamp the authority does not yet see here, whatever fails);
4. hand the rest to the :class:`~node._after_sync.AfterSync` thread,
   which syncs the WAL and only then acks each delivery (committed /
   duplicates / rejections) and hands the productions to the senders, while
   this thread goes on with the next batch;
5. fire timers that became due (their sends wait for the sync the same way).

Deliveries wait for a slot (``max_queued`` batches): when the worker falls
behind, the gRPC handler blocks and the sender's window fills up.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from contextlib import suppress

from millrace.delivery import DeliveryWork, Origin
from millrace.engine import (
    BatchOutcome,
    Frame,
    IntervalDriver,
    IntervalProcessor,
    Production,
    frames_of,
)
from millrace.node._after_sync import AfterSync
from millrace.node._inbox import (
    STOP,
    Acked,
    Fence,
    ForgetRetired,
    InboxItem,
    Refused,
    Watermark,
    WeakWait,
)
from millrace.statestore import MAX_EPOCH, EpochFencedError
from millrace.wire.v1 import delivery_pb2

log = logging.getLogger(__name__)


TIMER_RETRY_S = 0.2
"""Pause before firing timers again after one raised (records are resent after as long)."""
RETIRED_LOOK_S = 5.0
"""How often an interval offers the floors of the senders it retired (while it has any)."""


class WorkerHooks:
    """What the worker calls out to; the node supplies real ones."""

    def route(self, origin: Origin, frames: list[Frame]) -> None:
        """Hand productions, in frames per destination, to the senders."""

    def report(self, worker: IntervalWorker, urgent: bool) -> int:
        """Tell the watermark authority this interval's oldest work; a ticket for
        :meth:`wait_reported` (0: nothing to wait for)."""
        return 0

    def wait_reported(self, ticket: int) -> bool:
        """Block until the authority accepted the report of ``ticket``; False when the
        node is stopping (then nothing may be acked)."""
        return True

    def retired(self, worker: IntervalWorker, floors: Mapping[int, int]) -> None:
        """Tell every receiver these floors of senders ``worker``'s interval retired
        (``engine/_retired_senders.py``), then :meth:`IntervalWorker.forget_retired`."""

    def confirm_lease(self, worker: IntervalWorker) -> bool:
        """Block until the interval's lease is confirmed fresh (True); False when it was
        superseded or the node is stopping: then nothing may be acked or sent."""
        return True

    def sender_epoch_ok(self, computation: str, index: int, epoch: int) -> bool:
        """False for a sender epoch the ownership registry never granted (forged, or newer
        than the receiver knows yet): such a batch is refused, the epoch never adopted."""
        return 0 <= epoch < MAX_EPOCH

    def verify_lease(self) -> None:
        """A message claims a newer owner of an interval here: ask the registry now."""

    def committed(self, worker: IntervalWorker, outcome: BatchOutcome, seconds: float) -> None:
        """A commit happened (metrics)."""


class IntervalWorker:
    """Owns an :class:`IntervalDriver` (and its processor); every call into them happens
    on this thread."""

    def __init__(
        self,
        processor: IntervalProcessor,
        hooks: WorkerHooks,
        *,
        max_queued: int = 16,
        max_batch_records: int = 4000,
        tick_s: float = 0.05,
    ) -> None:
        self.processor = processor
        self.hooks = hooks
        self.driver = IntervalDriver(processor, sender_epoch_ok=hooks.sender_epoch_ok)
        self._inbox: queue.SimpleQueue[InboxItem] = queue.SimpleQueue()
        self._slots = threading.BoundedSemaphore(max_queued)
        self._max_batch_records = max_batch_records
        self._tick_s = tick_s
        self._reported_oldest: int | None = None
        self._report_due = 0.0
        self._retired_look_at = 0.0
        self._timer_retry_at = 0.0
        self.origin = Origin(processor.name, processor.interval, processor.epoch)
        self._weak: WeakWait | None = None
        spec = processor.spec
        self._send_first = self._send_weak if spec.productions == "weak" else None
        self._weak_threshold_s = spec.weak_threshold_ms / 1000
        name = f"{processor.name}-{processor.interval}"
        self._thread = threading.Thread(target=self._run, name=f"worker-{name}", daemon=True)
        self.cpu_seconds = 0.0
        """CPU seconds this worker's thread used (batches, timers, upkeep), as of its last
        turn: the interval's cost, for the load reports (waiting does not count)."""
        # Weak productions are sent before their commit: nothing to gain by deferring.
        self._after_sync = (
            AfterSync(processor.make_durable, f"after-sync-{name}")
            if self._send_first is None
            else None
        )

    # -- called from other threads -------------------------------------------

    def start(self) -> None:
        """Resend the outbox, then start the loop."""
        pending = self.driver.resend()
        if pending:
            self.hooks.route(self.origin, pending)
        if self._after_sync is not None:
            self._after_sync.start()
        self._thread.start()

    def deliver(self, work: DeliveryWork) -> None:
        """Queue a delivery (blocks while ``max_queued`` deliveries are waiting)."""
        self._slots.acquire()
        self._inbox.put(work)

    def acknowledged(self, outbox_keys: list[bytes]) -> None:
        """Downstream acked these productions."""
        weak = self._weak
        if weak is not None:
            weak.ack(outbox_keys)
        self._inbox.put(Acked(outbox_keys))

    def refused(self, production: Production, reason: str) -> None:
        """Downstream will never take this production: dead-letter it here."""
        self._inbox.put(Refused(production, reason))

    def forget_retired(self, floors: Mapping[int, int]) -> None:
        """Every receiver took these floors of retired senders: stop answering for them."""
        self._inbox.put(ForgetRetired(floors))

    def fence(self, epoch: int, reason: str) -> None:
        """A newer owner exists: stop committing, for good."""
        self._inbox.put(Fence(epoch, reason))

    def set_watermark(self, low_watermark_ms: int) -> None:
        """New input low watermark (from the authority's watch)."""
        self._inbox.put(Watermark(low_watermark_ms))

    def stop(self, timeout: float = 5.0) -> None:
        """Finish the current turn and stop."""
        self._inbox.put(STOP)
        self._thread.join(timeout)
        if self._after_sync is not None:
            self._after_sync.stop(timeout)

    @property
    def stopped(self) -> bool:
        """True once the loop has ended (after :meth:`stop`)."""
        return not self._thread.is_alive()

    @property
    def fenced(self) -> bool:
        """True once this interval has lost ownership."""
        return self.driver.fenced

    @property
    def fenced_reason(self) -> str:
        """Why this interval lost ownership ("" while it owns it)."""
        return self.driver.fenced_reason

    # -- the loop (worker thread) --------------------------------------------------

    def _run(self) -> None:
        while True:
            items = self._drain()
            if STOP in items:
                self._turn([i for i in items if i is not STOP])
                if not self.fenced:
                    with suppress(Exception):  # a failed delete only causes a resend
                        self.processor.flush_acknowledged()
                return
            try:
                self._turn(items)
            except EpochFencedError as exc:
                self._become_fenced(str(exc))
            except Exception:
                log.exception(
                    "interval %s/%s failed a turn", self.origin.computation, self.origin.interval
                )
                time.sleep(self._tick_s)
            self.cpu_seconds = time.thread_time()

    def _drain(self) -> list[InboxItem]:
        try:
            items = [self._inbox.get(timeout=self._tick_s)]
        except queue.Empty:
            return []
        records = 0
        while records < self._max_batch_records:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            items.append(item)
            if isinstance(item, DeliveryWork):
                records += len(item.batch.records)
        return items

    def _turn(self, items: list[InboxItem]) -> None:
        deliveries = [i for i in items if isinstance(i, DeliveryWork)]
        try:
            self._control(items)
            if deliveries:
                self._process(deliveries)
            elif not items:
                self.processor.flush_acknowledged()
            if not self.fenced:
                self._fire_timers()
                self._maybe_report(urgent=False)
                self._maintain()
        finally:
            for _ in deliveries:
                self._slots.release()

    def _control(self, items: list[InboxItem]) -> None:
        """Apply acknowledgements, watermarks, fences and refusals."""
        for item in items:
            if isinstance(item, Acked):
                # Under load the frame deletes ride along with the next commit; an idle
                # turn commits them on their own.
                self.driver.acknowledged(item.outbox_keys, flush=False)
            elif isinstance(item, Watermark):
                self.driver.advance_watermark(item.low_watermark_ms)
            elif isinstance(item, Fence) and not self.fenced:
                self.driver.fence(item.epoch, item.reason)
                self._log_fenced()
            elif isinstance(item, Refused):
                self.driver.refused(item.production, item.reason)
            elif isinstance(item, ForgetRetired) and not self.fenced:
                self.processor.forget_retired(item.floors)

    def _process(self, deliveries: list[DeliveryWork]) -> None:
        admission = self.driver.admit([work.batch for work in deliveries])
        if admission.ask_registry:
            self.hooks.verify_lease()
        work_of = {id(work.batch): work for work in deliveries}
        for batch, ack in admission.refused:
            work_of[id(batch)].reply(ack)
        accepted = [work_of[id(batch)] for batch in admission.accepted]
        if not accepted:
            return
        started = time.perf_counter()
        try:
            wires = [wire for work in accepted if (wire := work.wire) is not None]
            outcome = self.driver.process(
                admission.accepted,
                wires=wires if len(wires) == len(accepted) else None,
                send_first=self._send_first,
                durable=self._after_sync is None,
            )
        except BaseException as exc:
            # Nothing was committed: answer every delivery so no sender waits forever.
            fenced = isinstance(exc, EpochFencedError)
            for work in accepted:
                if fenced:
                    work.reply(self.driver.refuse(work.batch, delivery_pb2.NOT_OWNER, str(exc)))
                else:  # an ack listing nothing: the sender retries every record
                    work.reply(self.driver.unprocessed(work.batch))
            raise
        for rid in outcome.dead_lettered:
            log.warning(
                "dead letter in %s/%s: record %s (Admin.ListDeadLetters has the error)",
                self.origin.computation, self.origin.interval, rid.hex(),
                extra={"event": "dead_letter", "record_id": rid.hex()},
            )  # fmt: skip
        ticket = self._maybe_report(urgent=True)
        # Weak productions went out before the commit.
        self._when_durable(
            outcome, started, send=self._send_first is None, answer=accepted, reported=ticket
        )

    def _when_durable(
        self,
        outcome: BatchOutcome,
        started: float,
        *,
        send: bool,
        answer: list[DeliveryWork] | None = None,
        reported: int = 0,
    ) -> None:
        """Once the commit is synced (and the watermark report ``reported`` accepted):
        metrics, ack the deliveries in ``answer``, send the productions (``send``). On
        the after-sync thread, in commit order, if there is one."""

        def act() -> None:
            if reported and not self.hooks.wait_reported(reported):
                return  # stopping: unacked, so its senders resend it to the next owner
            if not self.hooks.confirm_lease(self):
                # Replaced while this was processed (a pause, a partition): the new owner
                # takes these records; nothing of this commit leaves this process.
                for work in answer or ():
                    work.reply(
                        self.driver.refuse(work.batch, delivery_pb2.NOT_OWNER, "not the owner")
                    )
                return
            self.hooks.committed(self, outcome, time.perf_counter() - started)
            if answer:
                acks = self.driver.answer([work.batch for work in answer], outcome)
                for work, ack in zip(answer, acks, strict=True):
                    work.reply(ack)
            if send and outcome.frames:
                self.hooks.route(self.origin, outcome.frames)

        if self._after_sync is None:
            act()
        else:
            self._after_sync.submit(act)

    def _send_weak(self, productions: list[Production]) -> set[bytes]:
        """Weak productions: send now, wait up to the threshold, return what was acked."""
        weak = WeakWait({p.outbox_key for p in productions})
        self._weak = weak
        try:
            self.hooks.route(self.origin, frames_of(productions))
            return weak.wait(self._weak_threshold_s)
        finally:
            self._weak = None

    def _fire_timers(self) -> None:
        if self._timer_retry_at and time.monotonic() < self._timer_retry_at:
            return
        while True:
            started = time.perf_counter()
            outcome = self.driver.fire_timers(durable=self._after_sync is None)
            if outcome.timers_fired:
                ticket = self._maybe_report(urgent=True)
                self._when_durable(outcome, started, send=True, reported=ticket)
            # A failed timer is retried a little later (the failure may be transient),
            # not at once in this loop; the interval's other timers wait that long too.
            self._timer_retry_at = (
                time.monotonic() + TIMER_RETRY_S if outcome.timers_failed else 0.0
            )
            if not outcome.timers_fired or outcome.timers_failed:
                return

    def _maintain(self) -> None:
        """The store's upkeep, each part on its own schedule (cheap to call every turn)."""
        now = time.monotonic()
        if now >= self._retired_look_at:
            self._retired_look_at = now + RETIRED_LOOK_S
            if floors := self.processor.retired_floors():
                self.hooks.retired(self, floors)
        self.processor.compact_store()
        expired = self.processor.expire_dead_letters()
        if expired:
            log.info(
                "%s/%s: %d dead letters past their retention deleted",
                self.origin.computation, self.origin.interval, expired,
                extra={"event": "dead_letters_expired", "count": expired},
            )  # fmt: skip

    def _maybe_report(self, *, urgent: bool) -> int:
        """Report the oldest work if due or changed; the ticket to wait for before acking
        when it moved earlier (0 otherwise)."""
        oldest = self.processor.oldest_work()
        now = time.monotonic()
        moved_earlier = oldest is not None and (
            self._reported_oldest is None or oldest < self._reported_oldest
        )
        ticket = 0
        if (urgent and moved_earlier) or now >= self._report_due or oldest != self._reported_oldest:
            ticket = self.hooks.report(self, urgent and moved_earlier)
            self._reported_oldest = oldest
            self._report_due = now + 0.1
        return ticket if urgent and moved_earlier else 0

    def _become_fenced(self, reason: str) -> None:
        if not self.fenced:
            self.driver.lost(reason)
            self._log_fenced()

    def _log_fenced(self) -> None:
        log.warning(
            "interval %s/%s fenced: %s",
            self.origin.computation, self.origin.interval, self.fenced_reason,
            extra={"event": "fenced", "computation": self.origin.computation,
                   "interval": self.origin.interval, "epoch": self.origin.epoch},
        )  # fmt: skip
