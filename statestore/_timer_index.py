"""``TimerIndex``: every committed timer of a store, in memory, for reads without scans.

RocksDB stays the record of truth (the ``TIMERS`` column, one index entry per
timer, written in each commit's batch); this is its mirror, rebuilt from those
entries when the store opens and updated after each successful commit. It answers
"which timers are due" and "when is the earliest" (in time order, then in the byte
order of the timer's key length, key and tag), "what time is this timer set for",
and which entries a commit that changes timers writes. Being in memory, it needs no
time-ordered copy of each entry on disk (earlier versions wrote one; see
``StateStore``, which drops them).

It is held natively (:class:`millrace.dataplane.TimerIndex`, an ordered set and
a hash map): a commit's changes are staged and applied in one call each, with
no Python step per timer.
"""

from __future__ import annotations

from collections.abc import Mapping

from millrace.dataplane import TimerIndex as _NativeTimerIndex
from millrace.statestore import _keys
from millrace.statestore._engine import Batch, Column, Engine
from millrace.statestore.types import TimeDomain, Timer

TimerId = tuple[TimeDomain, bytes, str]


class TimerIndex:
    """The committed timers of one store."""

    def __init__(self, native: _NativeTimerIndex | None = None) -> None:
        self._native = native if native is not None else _NativeTimerIndex()
        self._staged: Mapping[TimerId, Timer | None] | None = None
        """The changes of the last :meth:`stage`, which the native index holds read."""

    @classmethod
    def load(cls, engine: Engine) -> TimerIndex:
        """Read every timer from the engine's index entries."""
        start, end = _keys.TIMER_INDEX, _keys.prefix_end(_keys.TIMER_INDEX)
        return cls(_NativeTimerIndex.load(list(engine.scan(Column.TIMERS, start, end))))

    def __len__(self) -> int:
        return len(self._native)

    def time_of(self, ident: TimerId) -> int | None:
        """The committed time of timer ``(domain, key, tag)``, or None."""
        time_ms: int | None = self._native.time_of(*ident)
        return time_ms

    def stage(self, batch: Batch, changes: Mapping[TimerId, Timer | None]) -> None:
        """Write a commit's timer changes (a timer, or None: deleted) into ``batch``:
        a deleted timer's entry goes, a set or moved one's is put; a timer set again to
        its committed time writes nothing."""
        deletes, keys, values = self._native.stage(changes)
        self._staged = changes
        batch.delete_keys(Column.TIMERS, deletes)
        batch.put_many(Column.TIMERS, zip(keys, values, strict=True))

    def apply(self, changes: Mapping[TimerId, Timer | None]) -> None:
        """A commit's timer changes, once it is durable (those :meth:`stage` wrote last
        are applied as it read them)."""
        if changes is self._staged:
            self._staged = None
            self._native.apply_staged()
        else:
            self._native.apply(changes)

    def earliest(self, domain: TimeDomain) -> int | None:
        """The earliest time of ``domain``'s timers, or None."""
        time_ms: int | None = self._native.earliest(domain)
        return time_ms

    def due(self, domain: TimeDomain, up_to_ms: int | None, limit: int | None) -> list[Timer]:
        """Timers of ``domain`` at or before ``up_to_ms`` (None: all), in time order."""
        new = tuple.__new__  # the named tuple built in C: one per due timer
        return [new(Timer, (domain, *row)) for row in self._native.due(domain, up_to_ms, limit)]
