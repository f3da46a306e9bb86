"""``IntervalProcessor``: the MillWheel protocol for one key interval, over its store.

The node runtime, the in-process test harness and (later) the Spark backfill
all drive this one class:

1. ``process_records``: dedup -> user code per record -> ONE atomic commit of
   state, record ids, timers and (strong productions) the outbox. Returns
   what to ack and what to send; the caller acks, then sends.
2. ``fire_timers``: due timers, in time order, each fire deleting its timer
   in the same commit as its effects.
3. ``acknowledge``: productions acked downstream leave the outbox
   (:class:`~engine._outbox_ledger.OutboxLedger` keeps its books).

It keeps no process-global state, so many run side by side in one process.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from millrace.computations import (
    Computation,
    KeyInterval,
    Layout,
    Topology,
)
from millrace.engine._batch_scope import (
    BatchScope,
    last_record_setters,
    offer_batch,
)
from millrace.engine._dead_letters import read_letters, stage_letter
from millrace.engine._due_timers import due_timers
from millrace.engine._failures import FailureBook
from millrace.engine._frames import Frame
from millrace.engine._keying import Admitted, RecordKeying
from millrace.engine._outbox_ledger import OutboxLedger
from millrace.engine._outcome import BatchOutcome
from millrace.engine._production_ids import (
    Production,
    record_id_prefix,
)
from millrace.engine._received import Received
from millrace.engine._retired_senders import RETIRED_SENDERS, retired_senders
from millrace.engine._routing import FrameBuilder, ProductionRouter
from millrace.engine._scope import RecordScope
from millrace.engine._sender_epochs import SenderEpochs
from millrace.engine._state_layout import ensure_state_layout
from millrace.engine._timer_cuts import TimerCuts
from millrace.engine._timer_round import TimerRound
from millrace.engine._upkeep import StoreUpkeep
from millrace.statestore import (
    Clock,
    DedupStats,
    SenderProgress,
    StateStore,
    Transaction,
    wall_clock_ms,
)
from millrace.statestore.types import TimeDomain
from millrace.wire.v1 import admin_pb2, record_pb2


@dataclass(frozen=True, slots=True)
class IntervalStatus:
    """What an interval reports of itself: to ``Admin.Status``, to the metrics, to the
    startup log."""

    computation: str
    interval: int
    """Its id."""
    share: KeyInterval
    """The range of the key-hash space it holds."""
    epoch: int
    outbox_size: int
    """Productions sent but not yet acknowledged."""
    oldest_unacked_age_s: float
    records_committed: int
    pending_timers: int
    input_watermark: int | None
    dedup: DedupStats


class IntervalProcessor:
    """One key interval of one computation, over its own :class:`StateStore`."""

    def __init__(
        self,
        *,
        topology: Topology,
        computation: str,
        interval: int,
        store: StateStore,
        epoch: int,
        clock: Clock = wall_clock_ms,
        cut_at_timers: bool = False,
        ephemeral: bool = False,
    ) -> None:
        """``interval``: the interval's id (:meth:`computations.KeyInterval.id`: one of
        the computation's first intervals by its index, a half of a split one by the
        number after them).

        ``cut_at_timers`` (backfills, ``engine/_timer_cuts.py``): a commit never runs
        a key past a timer set for it earlier in the commit; the key's later records
        come back in ``BatchOutcome.retry``.

        ``ephemeral`` (a backfill's interval run, which any failure redoes from an
        empty store): no record id is remembered (its input holds each id once) and
        no production is checkpointed in the outbox; the caller takes them from each
        outcome (:attr:`BatchOutcome.built`) and acknowledges nothing. Production ids
        and everything else committed are the same."""
        self.topology = topology
        self._cut_at_timers = cut_at_timers
        self._ephemeral = ephemeral
        self.spec = topology.computations[computation]
        self.name = computation
        self.interval = interval
        self.share = KeyInterval.of_id(computation, interval, self.spec.intervals)
        """The range of the key-hash space the interval holds."""
        self.store = store
        self.epoch = epoch
        self._clock = clock
        handler = topology.handler_class(computation)
        self._user: Computation = handler()
        self._user.setup(self.spec.params)
        self._handles_timers = handler.handles_timers()
        self._batches = self._user.handles_batches()
        self._upkeep = StoreUpkeep(store, self.spec.dead_letter_retention_ms, clock)
        self._outputs = frozenset(self.spec.outputs)
        extractors = {s: topology.key_extractor(computation, s) for s in self.spec.input_streams()}
        keyed_as_sent = frozenset(i.stream for i in self.spec.inputs if i.keyed_as_sent)
        self._keying = RecordKeying(
            computation, self.share.index, self.share.count, extractors, self._dead_letter,
            keyed_as_sent=keyed_as_sent,
        )  # fmt: skip
        self._router = ProductionRouter(topology, computation)
        self._record_id_prefix = record_id_prefix(computation)
        self._failures = FailureBook(self.spec.max_attempts)
        self.records_committed = 0
        """Records newly committed since this processor started (a status figure)."""
        self.letters_written = 0
        """Dead letters staged since this processor started (the harness watches it)."""
        self._sender_epochs = SenderEpochs(store)
        self.input_watermark: int | None = None
        self._timers = TimerRound(
            computation=computation, user=self._user, store=store, failures=self._failures,
            clock=clock, scope=self._scope, dead_letter=self._put_letter,
        )  # fmt: skip
        store.claim_epoch(epoch)
        ensure_state_layout(store, epoch)
        self._outbox = OutboxLedger(store)
        self.in_flight = self._outbox.in_flight
        """Productions not acknowledged downstream yet (also holding the watermark back)."""
        self._retired = retired_senders(store)
        self._outbox.count_below(self._retired.through if self._retired.floors else 0)

    def route_by(self, layouts: Mapping[str, Layout]) -> None:
        """Route productions by the consumers' intervals now (``layouts``: those with
        split intervals); safe beside the driving thread (a commit under way routes as
        before, and whoever sends it routes again what went to a split interval)."""
        self._router = ProductionRouter(self.topology, self.name, layouts)

    # -- 1. records --------------------------------------------------------

    def received(self, wires: Sequence[bytes]) -> Received:
        """The records of serialized ``DeliveryBatch`` messages, decoded for this
        interval's admission."""
        return Received.decode(wires, interval=self.share.index, intervals=self.share.count)

    def process_records(
        self,
        records: Received | Sequence[record_pb2.Record],
        *,
        send_first: Callable[[list[Production]], set[bytes]] | None = None,
        durable: bool = True,
        progress: Sequence[SenderProgress] = (),
    ) -> BatchOutcome:
        """Dedup, run user code, commit everything in one write. See the module docstring.

        ``records``: as :meth:`received` decoded them, or protobuf records.

        ``send_first`` (weak productions): called with the productions *before* the
        commit; returns the outbox keys acknowledged in time. Only the others are
        checkpointed. Safe because production ids derive from the input record ids:
        a replay after a crash re-sends the same ids, which receivers drop.
        ``durable=False``: the commit is not synced; the caller must call
        :meth:`make_durable` before acking or sending anything of it.
        ``progress``: what the deliveries said of their senders' progress; their
        record ids are kept until the senders can no longer resend them.
        """
        if not isinstance(records, Received):
            records = Received.of_records(
                records, interval=self.share.index, intervals=self.share.count
            )
        outcome = BatchOutcome()
        built = self._router.builder()
        txn = self.store.begin(self.epoch)
        now = self._clock()
        committed = outcome.committed
        failures = self._failures
        admitted, repeats = self._keying.admit(
            txn, records, outcome, remembered=not self._ephemeral
        )
        if self._batches and admitted:
            admitted = self._offer_batch(txn, admitted, now, outcome)
        scope = self._scope(txn, b"", 0, now)
        # Looked up once: this loop runs per record.
        process, reset, apply = self._user.process_record, scope.reset, scope.apply
        held, add, prefix = failures.held, built.add, self._record_id_prefix
        cuts = TimerCuts() if self._cut_at_timers else None
        for i, rid, key, user_record in admitted:
            if (held and failures.held_by_another(key, rid, now)) or (
                cuts is not None and cuts.waits(key, user_record.event_time_ms)
            ):  # after the record holding its key, or the timer its key set before it
                outcome.retry.append(rid)
                continue
            reset(key, user_record.event_time_ms, rid)
            try:
                process(scope, user_record)
            except Exception as exc:
                self._failed(txn, records.wire_record(i), key, exc, outcome)
                continue
            if held:
                failures.succeeded(key, rid)
            if cuts is not None:
                cuts.note(key, scope.timer_changes)
            apply()
            committed.append(rid)
            if scope.emitted:
                add(prefix + rid, scope.emitted)
            if scope.late_ms:
                outcome.late_ms.extend(scope.late_ms)
        if repeats:
            done = set(committed)
            for rid in repeats:
                (outcome.duplicates if rid in done else outcome.retry).append(rid)
        if not self._ephemeral:
            txn.mark_seen(committed)
        if progress:
            txn.note_progress(progress)
        delivered: set[bytes] = set()
        if send_first and (productions := built.productions):
            delivered = send_first(productions)
        self._commit(txn, outcome, built, skip=delivered, durable=durable)
        outcome.built = built
        self._failures.committed(committed)
        self.records_committed += len(committed)
        return outcome

    def _offer_batch(
        self, txn: Transaction, admitted: Admitted, now: int, outcome: BatchOutcome
    ) -> Admitted:
        """The admitted records to ``process_batch`` first; returns those left to it."""
        batch = BatchScope(
            lambda key: self._scope(txn, key, 0, now, may_produce=False),
            txn,
            self.input_watermark,
            now,
            last_record_setters(admitted),
        )
        return offer_batch(
            self._user, batch, admitted, self._failures.held, outcome,
            cut_at_timers=self._cut_at_timers,
        )  # fmt: skip

    def _failed(
        self,
        txn: Transaction,
        record: record_pb2.Record,
        key: bytes,
        exc: Exception,
        outcome: BatchOutcome,
    ) -> None:
        rid = record.record_id
        attempts = self._failures.failed(rid, key, self._clock())
        if attempts is None:
            outcome.retry.append(rid)  # its key is held until the retry
            return
        error = "".join(traceback.format_exception_only(exc)).strip()
        self._dead_letter(txn, record, error, attempts, outcome)

    def _dead_letter(
        self,
        txn: Transaction,
        record: record_pb2.Record,
        error: str,
        attempts: int,
        outcome: BatchOutcome,
    ) -> None:
        rid = record.record_id
        self._put_letter(txn, rid, record, error, attempts)
        txn.mark_seen([rid])
        outcome.committed.append(rid)
        outcome.dead_lettered.append(rid)

    # -- 2. timers ---------------------------------------------------------

    def fire_timers(self, limit: int = 1000, *, durable: bool = True) -> BatchOutcome:
        """Fire event-time timers the input watermark has passed and due processing-time
        timers, in time order, in one commit (``engine/_timer_round.py``). Call again
        while it fires ``limit``. ``durable`` as for :meth:`process_records`.

        A timer whose user code raises stays pending and holds its key: the key's
        later timers wait in the store and its records are left unacked until the
        timer succeeds or is dead-lettered (after ``max_attempts`` rounds). Retry it
        in a later round, not at once: the failure may be transient."""
        outcome = BatchOutcome()
        now = self._clock()
        due = due_timers(self.store, now, self.input_watermark, limit)
        if not due:
            return outcome
        built = self._router.builder()
        txn = self.store.begin(self.epoch)
        fired_under = self._timers.fire(
            txn, due, now=now, watermark=self.input_watermark, outcome=outcome, built=built
        )
        self._commit(txn, outcome, built, durable=durable)
        self._timers.committed(fired_under)
        outcome.built = built
        return outcome

    def _put_letter(
        self, txn: Transaction, ident: bytes, record: record_pb2.Record, error: str, attempts: int
    ) -> None:
        stage_letter(txn, self.name, ident, record, error, attempts, self._clock())
        self.letters_written += 1

    # -- fencing of senders --------------------------------------------------

    def accept_sender(self, computation: str, interval: int, epoch: int) -> bool:
        """False when ``(computation, interval)`` has already been seen at a newer epoch:
        the sender is a zombie. A newer epoch is remembered durably with the next commit."""
        return self._sender_epochs.accept(computation, interval, epoch)

    # -- 3. acks -------------------------------------------------------------

    def acknowledge(self, outbox_keys: Iterable[bytes], *, flush: bool = True) -> None:
        """Productions acked downstream are forgotten. Frames left with none unacked
        leave the outbox now (``flush``) or with the next commit (no fsync either way:
        a lost delete only causes a resend, which the receiver deduplicates)."""
        self._outbox.acknowledged(outbox_keys)
        if flush:
            self.flush_acknowledged()

    def flush_acknowledged(self, *, sync: bool = False) -> None:
        """Commit the deletes of fully acknowledged frames still waiting for a commit."""
        if self._outbox.has_emptied:
            txn = self.store.begin(self.epoch)
            staged = self._outbox.stage(txn)
            txn.commit(sync=sync)
            self._outbox.committed(staged)

    def refused(self, production: Production, reason: str) -> None:
        """A receiver will never accept ``production``: keep it as a dead letter, with the
        reason, and stop resending it."""
        txn = self.store.begin(self.epoch)
        error = f"refused by {production.consumer}/{production.interval}: {reason}"
        self._put_letter(txn, production.record.record_id, production.record, error, 1)
        self._outbox.acknowledged([production.outbox_key])
        staged = self._outbox.stage(txn)
        txn.commit()
        self._outbox.committed(staged)

    def retired_floors(self) -> dict[int, int]:
        """The retired senders this interval answers for whose floors receivers may take
        now (``engine/_retired_senders.py``): none while an inherited frame awaits an
        ack. Their deletes are made durable first (a restart resends nothing of them)."""
        if not self._retired.floors or self._outbox.pending_below:
            return {}
        self.flush_acknowledged(sync=True)
        return dict(self._retired.floors)

    def forget_retired(self, told: Mapping[int, int]) -> None:
        """Every receiver took these floors of retired senders: stop answering for them."""
        left = self._retired.without(told)
        if left != self._retired:
            txn = self.store.begin(self.epoch)
            txn.set_meta(RETIRED_SENDERS, left.encode())
            txn.commit()
            self._retired = left

    def pending_productions(self) -> list[Production]:
        """Every production in the outbox, in the order they were made."""
        return [p for frame in self.pending_frames() for p in frame.productions]

    def pending_frames(self) -> list[Frame]:
        """The outbox's frames in the order they were made, as stored (to resend after
        a restart: a consumer that keeps the latest value per key must see them in order)."""
        return self._outbox.pending_frames()

    def make_durable(self) -> None:
        """Sync every commit made so far (see ``durable`` of :meth:`process_records`).
        Safe to call from another thread than the one committing."""
        self.store.sync()

    # -- watermark inputs ------------------------------------------------------

    def advance_watermark(self, low_watermark: int) -> None:
        """Set the input low watermark; it never moves back."""
        if self.input_watermark is None or low_watermark > self.input_watermark:
            self.input_watermark = low_watermark

    def oldest_work(self) -> int | None:
        """Oldest event time this interval still holds back: unacked productions and
        pending event-time timers (records in flight are held by their senders)."""
        candidates = [
            t
            for t in (self.in_flight.oldest(), self.store.next_timer_ms(TimeDomain.EVENT_TIME))
            if t is not None
        ]
        return min(candidates) if candidates else None

    def status(self) -> IntervalStatus:
        """This interval's status now (reads only; safe beside the driving thread)."""
        return IntervalStatus(
            computation=self.name,
            interval=self.interval,
            share=self.share,
            epoch=self.epoch,
            outbox_size=len(self.in_flight),
            oldest_unacked_age_s=self.in_flight.oldest_age_s(),
            records_committed=self.records_committed,
            pending_timers=self.store.pending_timers,
            input_watermark=self.input_watermark,
            dedup=self.store.dedup_stats(),
        )

    def expire_dead_letters(self) -> int:
        """Delete the dead letters older than the computation's
        ``dead_letter_retention_ms`` (none when it is 0), and the retired timer-fire
        counters of an older store; returns how many dead letters went. The scan runs
        at most once a minute: call it every turn."""
        return self._upkeep.sweep(self.epoch)

    def compact_store(self) -> list[str]:
        """Drop the tombstones RocksDB would keep for good (engine/_upkeep.py); returns
        the columns rewritten. Cheap to call every turn."""
        return self._upkeep.compact()

    def dead_letters(self) -> list[admin_pb2.DeadLetter]:
        """Records and timers that failed ``max_attempts`` times, with their errors."""
        return read_letters(self.store)

    # -- shared steps ------------------------------------------------------------

    def _scope(
        self,
        txn: Transaction,
        key: bytes,
        event_time_ms: int,
        now: int,
        *,
        may_produce: bool = True,
        setter: bytes = b"",
    ) -> RecordScope:
        return RecordScope(
            computation=self.name,
            outputs=self._outputs,
            handles_timers=self._handles_timers,
            txn=txn,
            key=key,
            event_time_ms=event_time_ms,
            low_watermark=self.input_watermark,
            now_ms=now,
            may_produce=may_produce,
            setter=setter,
            fired_watermark=self._timers.fired_watermark,
        )

    def _commit(
        self,
        txn: Transaction,
        outcome: BatchOutcome,
        built: FrameBuilder,
        skip: AbstractSet[bytes] = frozenset(),
        *,
        durable: bool = True,
    ) -> None:
        """Checkpoint the productions (all of them, or all but the already-acked ``skip``),
        in frames per destination (:data:`FRAME_BYTES` at most each), in the same
        commit as everything else."""
        staged = self._outbox.stage(txn, None if self._ephemeral else built, skip)
        self._sender_epochs.stage(txn)
        txn.commit(sync=None if durable else False)
        self._sender_epochs.committed()
        self._outbox.committed(staged)
        outcome.frames = [frame for _, frame in staged]
