"""``TimerRound``: what one round of an interval's timer fires does inside its commit.

The processor (``engine/_processor.py``) finds the due timers, opens the commit and
closes it; a round in between fires them in time order: through ``process_timers``
first where the computation takes timers in batches, then one at a time through
``process_timer``. Each fire deletes its timer in the same commit as its effects. A
timer whose user code raises stays pending and holds its key (the key's later timers
and records wait) until it succeeds or, after ``max_attempts`` rounds, is
dead-lettered. The round also keeps the time up to which event-time timers ever
fired (a timer set behind it fires once: :func:`~engine._production_ids.fire_setter`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from operator import itemgetter
from typing import Protocol

from millrace.computations import Computation, FiredTimer
from millrace.dataplane import timer_fire_causes
from millrace.engine._batch_scope import TimerBatchScope, offer_timers
from millrace.engine._due_timers import timer_ident
from millrace.engine._failures import FailureBook
from millrace.engine._outcome import BatchOutcome
from millrace.engine._production_ids import (
    FIRED_WATERMARK,
    decode_fired_watermark,
    encode_fired_watermark,
    fire_setter,
    timer_fire_cause,
)
from millrace.engine._routing import FrameBuilder
from millrace.engine._scope import Emitted, RecordScope
from millrace.engine._tuples import new_tuple
from millrace.statestore import Clock, StateStore, Transaction
from millrace.statestore.types import TimeDomain, Timer
from millrace.wire.v1 import record_pb2


class ScopeMaker(Protocol):
    """The processor's user-code scope for one key, inside a commit."""

    def __call__(
        self,
        txn: Transaction,
        key: bytes,
        event_time_ms: int,
        now: int,
        *,
        may_produce: bool = True,
        setter: bytes = b"",
    ) -> RecordScope: ...


LetterWriter = Callable[[Transaction, bytes, record_pb2.Record, str, int], None]
"""Stages a dead letter: ``(txn, ident, record, error, attempts)``."""

_Made = list[tuple[int, bytes, list[Emitted]]]
"""What each fired timer produced: ``(its place in the round, cause, records)``."""


class TimerRound:
    """Fires one interval's due timers into a commit the caller opened and commits."""

    def __init__(
        self,
        *,
        computation: str,
        user: Computation,
        store: StateStore,
        failures: FailureBook,
        clock: Clock,
        scope: ScopeMaker,
        dead_letter: LetterWriter,
    ) -> None:
        self._name = computation
        self._user = user
        self._batches = user.handles_timer_batches()
        self._failures = failures
        self._clock = clock
        self._scope = scope
        self._dead_letter = dead_letter
        self.fired_watermark = decode_fired_watermark(store.get_meta(FIRED_WATERMARK))
        """The highest time up to which event-time timers ever fired (kept in the store
        with the fires): a timer set for after it fires once (timer_setter)."""

    def fire(
        self,
        txn: Transaction,
        due: list[Timer],
        *,
        now: int,
        watermark: int | None,
        outcome: BatchOutcome,
        built: FrameBuilder,
    ) -> int | None:
        """Fire ``due`` (in time order) into ``txn``, their productions into ``built``
        in firing order, counts into ``outcome``; returns what :meth:`committed` takes
        once ``txn`` is committed."""
        fired_under = self._note_fired_watermark(txn, due, watermark)
        failures = self._failures
        # What each timer produced, by its place in ``due``: framed in firing order,
        # whichever path fired it.
        made: _Made = []
        left = list(enumerate(due))
        if self._batches:
            left = self._fire_batch(txn, left, now, watermark, outcome=outcome, made=made)
        for position, timer in left:
            ident = timer_ident(timer)
            if failures.held and failures.held_by_another(timer.key, ident, now):
                continue  # stays pending: it fires after what holds its key
            txn.delete_timer(timer.domain, timer.key, timer.tag)
            cause = timer_fire_cause(self._name, timer)
            scope = self._scope(txn, timer.key, timer.time_ms, now, setter=fire_setter(cause))
            fired = FiredTimer(
                key=timer.key, tag=timer.tag, time_ms=timer.time_ms, domain=timer.domain
            )
            try:
                self._user.process_timer(scope, fired)
            except Exception as exc:
                self._failed(txn, ident, timer, exc)
                outcome.timers_failed += 1
                continue
            if failures.held:
                failures.succeeded(timer.key, ident)
            failures.committed((ident,))
            scope.apply()
            outcome.late_ms.extend(scope.late_ms)
            if scope.emitted:
                made.append((position, cause, scope.emitted))
            outcome.timers_fired += 1
        made.sort(key=itemgetter(0))
        for _, cause, emitted in made:
            built.add(cause, emitted)
        return fired_under

    def committed(self, fired_under: int | None) -> None:
        """The round's commit is durable: its fired watermark holds."""
        self.fired_watermark = fired_under

    def _note_fired_watermark(
        self, txn: Transaction, due: list[Timer], watermark: int | None
    ) -> int | None:
        """Keep, with the round's fires, the time up to which its event-time timers fire
        if it is the highest yet; returns the highest."""
        fired = self.fired_watermark
        if watermark is None or all(t.domain != TimeDomain.EVENT_TIME for t in due):
            return fired
        up_to = watermark - 1  # as due_timers: a timer at T fires once the watermark is past T
        if fired is not None and up_to <= fired:
            return fired
        txn.set_meta(FIRED_WATERMARK, encode_fired_watermark(up_to))
        return up_to

    def _fire_batch(
        self,
        txn: Transaction,
        due: list[tuple[int, Timer]],
        now: int,
        watermark: int | None,
        *,
        outcome: BatchOutcome,
        made: _Made,
    ) -> list[tuple[int, Timer]]:
        """Offer the due timers (with their places) to ``process_timers``; what they
        produced goes to ``made``. Returns those left to fire one at a time (every timer
        of a key it left, and of held keys)."""
        held = self._failures.held
        offered = [(p, t) for p, t in due if t.key not in held] if held else due
        if not offered:
            return due
        timers = [t for _, t in offered]
        fired = [new_tuple(FiredTimer, (t.key, t.tag, t.time_ms, t.domain)) for t in timers]
        causes = timer_fire_causes(self._name, timers)
        batch = TimerBatchScope(
            lambda key: self._scope(txn, key, 0, now, may_produce=False),
            txn,
            watermark,
            now,
            timers,
            causes=causes,
        )
        left_keys = offer_timers(self._user, batch, fired, held, outcome)
        if left_keys is None:
            return due
        taken = [i for i, t in enumerate(timers) if t.key not in left_keys]
        self._failures.committed(timer_ident(timers[i]) for i in taken)
        emitted = batch.emitted
        made.extend((offered[i][0], causes[i], emitted[i]) for i in taken if i in emitted)
        outcome.timers_fired += len(taken)
        return [(p, t) for p, t in due if t.key in left_keys]

    def _failed(self, txn: Transaction, ident: bytes, timer: Timer, exc: Exception) -> None:
        attempts = self._failures.failed(ident, timer.key, self._clock())
        if attempts is None:
            # Keep the timer (undo the delete staged above): it fires again next round.
            txn.set_timer(timer)
            return
        record = record_pb2.Record(
            key=timer.key, event_time_ms=timer.time_ms, stream=f"timer:{timer.tag}"
        )
        error = "timer: " + "".join(traceback.format_exception_only(exc)).strip()
        self._dead_letter(txn, ident, record, error, attempts)
