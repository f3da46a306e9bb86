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
from typing import Any

from computations import Computation
from engine._keying import Admitted
from engine._outcome import BatchOutcome
from engine._scope import RecordScope, state_key
from statestore import Transaction
from statestore.types import TimeDomain, Timer

_log = logging.getLogger(__name__)
_warned: set[str] = set()
"""Computation classes whose process_batch failure was logged (once each)."""


def offer_batch(
    user: Computation,
    batch: BatchScope,
    admitted: Admitted,
    held: Mapping[bytes, Any],
    outcome: BatchOutcome,
) -> Admitted:
    """Offer the new records to ``user.process_batch`` (held keys' records excepted:
    they wait for their failed record, one at a time); apply what it did to the keys
    it took whole, count their records committed, and return the records of the
    others (all of them if it raised)."""
    offered = [item for item in admitted if item[2] not in held] if held else admitted
    if not offered:
        return admitted
    user_records = [item[3] for item in offered]
    try:
        left = user.process_batch(batch, user_records)
        if len(left) == len(offered):
            return admitted  # it took nothing
        left_keys = {r.key for r in left}
    except Exception:  # raised, or returned something that is not records
        name = type(user).__name__
        if name not in _warned:
            _warned.add(name)
            _log.exception("%s.process_batch failed: its batches go one record at a time", name)
        return admitted  # nothing was applied: each record is processed on its own
    left_keys.update(held)
    outcome.late_ms.extend(batch.apply(skip=left_keys))
    rest = []
    for item in admitted:
        if item[2] in left_keys:
            rest.append(item)
        else:
            outcome.committed.append(item[1])
    return rest


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
    ) -> None:
        """``new_scope``: a key's scope, one that may not produce."""
        self._new_scope = new_scope
        self._txn = txn
        self._low_watermark = low_watermark
        self._now_ms = now_ms
        self.scopes: dict[bytes, RecordScope] = {}
        self._states: dict[bytes, dict[str, bytes]] = {}
        self._timers: dict[bytes, dict[tuple[TimeDomain, str], int]] = {}
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
            for tag, value in self._states.pop(key, {}).items():
                scope.put_state(tag, value)
            for (domain, tag), time_ms in self._timers.pop(key, {}).items():
                scope.set_timer(tag, time_ms, domain)
        return scope

    def read_states(self, keys: Sequence[bytes], tags: Sequence[str]) -> list[bytes | None]:
        raws = self._txn.get_many([state_key(k, t) for k, t in zip(keys, tags, strict=True)])
        if self.scopes or self._states:  # this call's own changes first
            for i, (key, tag) in enumerate(zip(keys, tags, strict=True)):
                if (scope := self.scopes.get(key)) is not None:
                    raws[i] = scope.get_state(tag)
                elif (own := self._states.get(key)) is not None and tag in own:
                    raws[i] = own[tag]
        return raws

    def write_states(
        self, keys: Sequence[bytes], tags: Sequence[str], values: Sequence[bytes]
    ) -> None:
        scopes, states = self.scopes, self._states
        for key, tag, value in zip(keys, tags, values, strict=True):
            if (scope := scopes.get(key)) is not None:
                scope.put_state(tag, value)
            elif (own := states.get(key)) is not None:
                own[tag] = bytes(value)
            else:
                states[key] = {tag: bytes(value)}

    def set_timers(
        self,
        keys: Sequence[bytes],
        tags: Sequence[str],
        times_ms: Sequence[int],
        domain: TimeDomain = TimeDomain.EVENT_TIME,
    ) -> None:
        domain = TimeDomain(domain)
        rules = self._rules = self._rules or self._new_scope(b"")
        scopes, timers = self.scopes, self._timers
        for key, tag, time_ms in zip(keys, tags, times_ms, strict=True):
            if (scope := scopes.get(key)) is not None:
                scope.set_timer(tag, time_ms, domain)
            elif (own := timers.get(key)) is not None:
                own[(domain, tag)] = rules.checked_timer_time(tag, time_ms)
            else:
                timers[key] = {(domain, tag): rules.checked_timer_time(tag, time_ms)}

    def apply(self, skip: AbstractSet[bytes] = frozenset()) -> list[int]:
        """Move every key's changes but ``skip``'s into the transaction; returns the
        lateness of the records reported late."""
        late: list[int] = []
        for key, scope in self.scopes.items():
            if key not in skip:
                scope.apply()
                late.extend(scope.late_ms)
        txn = self._txn
        txn.put_many(
            (state_key(key, tag), value)
            for key, own in self._states.items()
            if key not in skip
            for tag, value in own.items()
        )
        for key, own_timers in self._timers.items():
            if key not in skip:
                for (domain, tag), time_ms in own_timers.items():
                    txn.set_timer(Timer(domain=domain, key=key, tag=tag, time_ms=time_ms))
        return late
