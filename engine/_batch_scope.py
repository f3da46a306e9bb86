"""The :class:`computations.BatchContext` of one ``process_batch`` call: a scope per key.

Each key's changes are buffered in a :class:`RecordScope` of its own that may
not produce; :meth:`BatchScope.apply` moves those of the keys the call took
whole into the transaction once it returned, and nothing is applied if it
raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from millrace.computations import MAX_PRODUCED_BYTES, Computation, FiredTimer, Record
from millrace.computations.errors import ProduceError
from millrace.dataplane import state_keys
from millrace.engine._keying import Admitted, AdmittedWhole, admitted_keys_ids
from millrace.engine._outcome import BatchOutcome
from millrace.engine._pending import PendingChanges
from millrace.engine._production_ids import fire_setter
from millrace.engine._scope import (
    Emitted,
    RecordScope,
    checked_time,
    record_setter,
    record_setters,
    timer_setter,
    too_big,
)
from millrace.engine._timer_cuts import TimerCuts
from millrace.engine._tuples import new_tuple
from millrace.statestore import Transaction
from millrace.statestore.types import TimeDomain, Timer

_log = logging.getLogger(__name__)
T = TypeVar("T")
_warned: set[str] = set()
"""Computation classes whose batch hook failure was logged (once each)."""


def offer_batch(
    user: Computation,
    batch: BatchScope,
    admitted: Admitted,
    held: Mapping[bytes, Any],
    outcome: BatchOutcome,
    *,
    cut_at_timers: bool = False,
) -> Admitted:
    """Offer the new records to ``user.process_batch`` (held keys' records excepted:
    they wait for their failed record, one at a time); apply what it did to the keys
    it took whole, count their records committed, and return the records of the
    others (all of them if it raised).

    ``cut_at_timers`` (``engine/_timer_cuts.py``): what it did to a key with a record
    after a timer it set for that key is not applied either; the key's records are
    returned, to run one at a time."""
    offered: Admitted
    user_records: Sequence[Record]
    if isinstance(admitted, AdmittedWhole) and not held:
        offered, user_records = admitted, admitted.records  # the columns, as they are
    else:
        offered = [item for item in admitted if item[2] not in held] if held else admitted
        if not offered:
            return admitted
        user_records = [item[3] for item in offered]
    left_keys = _left_keys(user, "process_batch", batch, user_records)
    if left_keys is None:
        return admitted  # nothing was applied: each record is processed on its own
    left_keys.update(held)
    if cut_at_timers:
        left_keys.update(_keys_run_past_timers(batch, offered, left_keys))
    outcome.late_ms.extend(batch.apply(skip=left_keys))
    if not left_keys:  # it took every record
        outcome.committed.extend(admitted_keys_ids(admitted)[1])
        return []
    rest = []
    for item in admitted:
        if item[2] in left_keys:
            rest.append(item)
        else:
            outcome.committed.append(item[1])
    return rest


def _keys_run_past_timers(
    batch: BatchScope, offered: Admitted, left_keys: AbstractSet[bytes]
) -> set[bytes]:
    cuts = TimerCuts()
    for key in batch.keys_with_timer_changes():
        cuts.note(key, batch.timer_changes(key))
    return cuts.keys_run_past(
        (item[2], item[3].event_time_ms) for item in offered if item[2] not in left_keys
    )


def last_record_setters(admitted: Admitted) -> Callable[[bytes], bytes]:
    """The setter of the timers ``process_batch`` sets for a key on no record's account
    in particular: the key's last record of the batch (the map made on first use)."""
    book: dict[bytes, bytes] = {}

    def setter_of(key: bytes) -> bytes:
        if not book:
            book.update(zip(*admitted_keys_ids(admitted), strict=True))
        return record_setter(book[key])

    return setter_of


def offer_timers(
    user: Computation,
    batch: TimerBatchScope,
    offered: Sequence[FiredTimer],
    held: Mapping[bytes, Any],
    outcome: BatchOutcome,
) -> set[bytes] | None:
    """Offer the round's due timers (held keys' excepted) to ``user.process_timers``;
    apply what it did to the keys it took whole and return the keys it left (None:
    it took nothing, or raised: every timer fires one at a time)."""
    left_keys = _left_keys(user, "process_timers", batch, offered)
    if left_keys is None:
        return None
    left_keys.update(held)
    outcome.late_ms.extend(batch.apply(skip=left_keys))
    return left_keys


def _left_keys(
    user: Computation, hook: str, batch: BatchScope, items: Sequence[Record] | Sequence[FiredTimer]
) -> set[bytes] | None:
    """The keys of what ``user``'s batch hook (``process_batch`` or ``process_timers``)
    left of ``items``; None when it took nothing, or raised (logged once per class):
    then they all go one at a time."""
    try:
        left = getattr(user, hook)(batch, items)
        if len(left) == len(items):
            return None  # it took nothing
        return {item.key for item in left}
    except Exception:  # raised, or returned something that is neither records nor timers
        name = type(user).__name__
        if name not in _warned:
            _warned.add(name)
            _log.exception("%s.%s failed: its work goes one at a time", name, hook)
        return None


class BatchScope:
    """Implements :class:`computations.BatchContext`.

    A key's changes live in its :class:`RecordScope` once :meth:`for_key` made one;
    until then, what the bulk calls (:meth:`write_states`, :meth:`set_timers`) changed
    is kept per key here, without a scope (they run per (key, window) of a batch), and
    moves into the key's scope if one is made later."""

    def __init__(
        self,
        new_scope: Callable[[bytes], RecordScope],
        txn: Transaction,
        low_watermark: int | None,
        now_ms: int,
        setter_of: Callable[[bytes], bytes],
    ) -> None:
        """``new_scope``: a key's scope, one that may not produce; ``setter_of``: the
        setter of the timers set for a key on no record's account in particular."""
        self._new_scope = new_scope
        self._setter_of = setter_of
        self._txn = txn
        self._low_watermark = low_watermark
        self._now_ms = now_ms
        self.scopes: dict[bytes, RecordScope] = {}
        self._states: PendingChanges[str, bytes | None] = PendingChanges()
        """The states the bulk calls wrote, or deleted (None), of keys without a scope."""
        self._timers: PendingChanges[tuple[TimeDomain, str], tuple[int, bytes] | None]
        self._timers = PendingChanges()
        """The timers they set (time and setter) or deleted (None): ``(domain, tag)``."""
        self._rules: RecordScope | None = None

    @property
    def low_watermark(self) -> int | None:
        return self._low_watermark

    @property
    def processing_time_ms(self) -> int:
        return self._now_ms

    def for_key(self, key: bytes) -> RecordScope:
        scope = self.scopes.get(key)
        if scope is None:
            scope = self.scopes[key] = self._new_scope(key)
            scope.setter = self._setter_of(key)
            for tag, value in self._states.take(key).items():
                if value is None:
                    scope.delete_state(tag)
                else:
                    scope.put_state(tag, value)
            for (domain, tag), setting in self._timers.take(key).items():
                if setting is None:
                    scope.delete_timer(tag, domain)
                else:
                    scope.set_timer_by(tag, setting[0], domain, setting[1])
        return scope

    def read_states(self, keys: Sequence[bytes], tags: Sequence[str]) -> list[bytes | None]:
        raws = self._txn.get_many(state_keys(list(keys), list(tags)))
        if self.scopes or self._states:  # this call's own changes first
            scopes, states = self.scopes, self._states
            for i, (key, tag) in enumerate(zip(keys, tags, strict=True)):
                if (scope := scopes.get(key)) is not None:
                    raws[i] = scope.get_state(tag)
                elif (own := states.of(key)) is not None and tag in own:
                    raws[i] = own[tag]
        return raws

    def write_states(
        self, keys: Sequence[bytes], tags: Sequence[str], values: Sequence[bytes]
    ) -> None:
        self._bulk_states(keys, tags, list(map(bytes, values)))

    def delete_states(self, keys: Sequence[bytes], tags: Sequence[str]) -> None:
        self._bulk_states(keys, tags, [None] * len(keys))

    def _bulk_states(
        self, keys: Sequence[bytes], tags: Sequence[str], values: list[bytes | None]
    ) -> None:
        _same_lengths(keys, tags, values)
        keys, tags = list(keys), list(tags)

        def in_scope(scope: RecordScope, i: int) -> None:
            if (value := values[i]) is None:
                scope.delete_state(tags[i])
            else:
                scope.put_state(tags[i], value)

        if (kept := self._unscoped(keys, in_scope)) is not None:
            keys, tags, values = _picked(kept, keys), _picked(kept, tags), _picked(kept, values)
        self._states.extend(keys, tags, values)

    def _unscoped(
        self, keys: list[bytes], in_scope: Callable[[RecordScope, int], None]
    ) -> list[int] | None:
        """Hands each change ``i`` of a key that has a scope to ``in_scope(scope, i)``
        (its changes are kept there); the places of the others, None when they are all."""
        if not (scopes := self.scopes):
            return None
        kept = []
        for i, key in enumerate(keys):
            if (scope := scopes.get(key)) is None:
                kept.append(i)
            else:
                in_scope(scope, i)
        return None if len(kept) == len(keys) else kept

    def set_timers(
        self,
        keys: Sequence[bytes],
        tags: Sequence[str],
        times_ms: Sequence[int],
        domain: TimeDomain = TimeDomain.EVENT_TIME,
        *,
        record_ids: Sequence[bytes] | None = None,
    ) -> None:
        domain = TimeDomain(domain)
        setters = (
            record_setters(record_ids)
            if record_ids is not None
            else [self._setter_of(key) for key in keys]
        )
        _same_lengths(keys, tags, times_ms, setters)
        times = self._rules_scope().checked_timer_times(tags, times_ms)
        keys, tags = list(keys), list(tags)

        def in_scope(scope: RecordScope, i: int) -> None:
            scope.set_timer_by(tags[i], times[i], domain, setters[i])

        if (kept := self._unscoped(keys, in_scope)) is not None:
            keys, tags = _picked(kept, keys), _picked(kept, tags)
            times, setters = _picked(kept, times), _picked(kept, setters)
        idents = [(domain, tag) for tag in tags]
        self._timers.extend(keys, idents, list(zip(times, setters, strict=True)))

    def keys_with_timer_changes(self) -> set[bytes]:
        """The keys whose timers this call set or deleted (in their scopes or in bulk)."""
        return {key for key, scope in self.scopes.items() if scope.timer_changes} | set(
            self._timers.changed_keys()
        )

    def timer_changes(self, key: bytes) -> Mapping[tuple[TimeDomain, str], int | None]:
        """What this call did to ``key``'s timers: ``(domain, tag)`` -> time, or None."""
        if (scope := self.scopes.get(key)) is not None:
            return scope.timer_changes
        own = self._timers.of(key) or {}
        return {ident: None if setting is None else setting[0] for ident, setting in own.items()}

    def _rules_scope(self) -> RecordScope:
        """A scope of no key, for its checks of timers and outputs."""
        if self._rules is None:
            self._rules = self._new_scope(b"")
        return self._rules

    def apply(self, skip: AbstractSet[bytes] = frozenset()) -> list[int]:
        """Move every key's changes but ``skip``'s into the transaction; returns the
        lateness of the records reported late."""
        late: list[int] = []
        for key, scope in self.scopes.items():
            if key not in skip:
                scope.apply()
                late.extend(scope.late_ms)
        txn = self._txn
        fired = self._rules_scope().fired_watermark if self._timers else None
        keys, tags, values = self._states.entries(skip)
        if keys:
            txn.write_many(zip(state_keys(keys, tags), values, strict=True))  # None deletes
        keys, idents, settings = self._timers.entries(skip)
        for key, (domain, tag), setting in zip(keys, idents, settings, strict=True):
            if setting is None:
                txn.delete_timer(domain, key, tag)
            else:
                time_ms, setter = setting
                cause = timer_setter(domain, time_ms, fired, setter)
                txn.set_timer(new_tuple(Timer, (domain, key, tag, time_ms, cause)))
        return late


def _picked(places: list[int], column: list[T]) -> list[T]:
    """The items of ``column`` at ``places``."""
    return [column[i] for i in places]


def _same_lengths(*columns: Sequence[Any]) -> None:
    """ValueError unless the columns of a bulk call are of one length."""
    if len({len(column) for column in columns}) > 1:
        lengths = ", ".join(str(len(column)) for column in columns)
        raise ValueError(f"the columns of a bulk call differ in length: {lengths}")


class TimerBatchScope(BatchScope):
    """Implements :class:`computations.TimerBatchContext`: a :class:`BatchScope` over one
    round's timers, collecting each timer's productions."""

    def __init__(
        self,
        new_scope: Callable[[bytes], RecordScope],
        txn: Transaction,
        low_watermark: int | None,
        now_ms: int,
        offered: Sequence[Timer],
        *,
        causes: Sequence[bytes],
    ) -> None:
        """``offered``: the timers offered, in order, and ``causes`` the causes of their
        fires; each is deleted (as a timer that fires is) unless the call sets it
        again. Timers a key's call sets are set on its last offered timer's account."""
        last_causes = dict(zip((t.key for t in offered), causes, strict=True))
        super().__init__(
            new_scope, txn, low_watermark, now_ms, lambda key: fire_setter(last_causes[key])
        )
        self._timer_keys = [t.key for t in offered]
        idents = [(t.domain, t.tag) for t in offered]
        self._timers.extend(list(self._timer_keys), idents, [None] * len(offered))
        self.emitted: dict[int, list[Emitted]] = {}
        """Per offered timer (by position), what it produced, in order."""

    def produce_many(
        self,
        timers: Sequence[int],
        stream: str,
        keys: Sequence[bytes],
        values: Sequence[bytes],
        times_ms: Sequence[int],
    ) -> None:
        self._rules_scope().check_output(stream)
        emitted, timer_keys = self.emitted, self._timer_keys
        for timer, given_key, given_value, ts in zip(timers, keys, values, times_ms, strict=True):
            key, value = bytes(given_key), bytes(given_value)
            if timer_keys[timer] != key:
                raise ProduceError(
                    f"timer {timer} of key {timer_keys[timer]!r} produced a record of key "
                    f"{key!r} in process_timers: leave it to process_timer"
                )
            if len(key) + len(value) > MAX_PRODUCED_BYTES:
                raise too_big(stream, key, value)
            made = new_tuple(Emitted, (stream, key, value, checked_time(stream, ts)))
            emitted.setdefault(timer, []).append(made)
