"""``TimerIndex``: every committed timer of a store, in memory, for reads without scans.

RocksDB stays the record of truth (the ``TIMERS`` column, written in each
commit's batch); this is its mirror, rebuilt from the column's index entries
when the store opens and updated after each successful commit. It answers
"which timers are due" and "when is the earliest" from a heap per domain, and
"what time is this timer set for" from a dict, so neither a turn that fires
timers nor a commit that moves them seeks through the tombstones that fired
timers leave in the column.

The heap holds ``(time, key length, key, tag)``: the byte order of the
column's time-ordered keys, so due timers come out in exactly the order a
scan would give. A timer that moves or goes leaves its old heap entry
behind; an entry counts only while the dict still holds its time, and stale
entries are dropped when they reach the top (or all at once when they
outnumber the live ones).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from statestore import _keys
from statestore._engine import Column, Engine
from statestore.types import TimeDomain, Timer

TimerId = tuple[TimeDomain, bytes, str]
_Entry = tuple[int, int, bytes, str]
"""A heap entry: time, key length, key, tag."""
_COMPACT_SLACK = 1024
"""Stale heap entries tolerated beyond the live count before a rebuild."""


class TimerIndex:
    """The committed timers of one store."""

    def __init__(self) -> None:
        self._times: dict[TimerId, int] = {}
        self._heaps: dict[TimeDomain, list[_Entry]] = {d: [] for d in TimeDomain}

    @classmethod
    def load(cls, engine: Engine) -> TimerIndex:
        """Read every timer from the engine's index entries."""
        index = cls()
        start, end = _keys.TIMER_INDEX, _keys.prefix_end(_keys.TIMER_INDEX)
        for raw, value in engine.scan(Column.TIMERS, start, end):
            index._times[_keys.decode_timer_index_key(raw)] = _keys.decode_time(value)
        index._rebuild()
        return index

    def __len__(self) -> int:
        return len(self._times)

    def time_of(self, ident: TimerId) -> int | None:
        """The committed time of timer ``(domain, key, tag)``, or None."""
        return self._times.get(ident)

    def apply(self, changes: Mapping[TimerId, Timer | None]) -> None:
        """A commit's timer changes (set or moved to a time; None: deleted)."""
        times, heaps = self._times, self._heaps
        for ident, timer in changes.items():
            if timer is None:
                times.pop(ident, None)
            elif times.get(ident) != timer.time_ms:
                times[ident] = timer.time_ms
                domain, key, tag = ident
                heapq.heappush(heaps[domain], (timer.time_ms, len(key), key, tag))
        if sum(map(len, heaps.values())) > 2 * len(times) + _COMPACT_SLACK:
            self._rebuild()

    def earliest(self, domain: TimeDomain) -> int | None:
        """The earliest time of ``domain``'s timers, or None."""
        heap = self._heaps[domain]
        self._drop_stale_top(domain, heap)
        return heap[0][0] if heap else None

    def due(self, domain: TimeDomain, up_to_ms: int | None, limit: int | None) -> list[Timer]:
        """Timers of ``domain`` at or before ``up_to_ms`` (None: all), in time order."""
        heap = self._heaps[domain]
        times = self._times
        taken: list[_Entry] = []
        due: list[Timer] = []
        while heap and (limit is None or len(due) < limit):
            entry = heap[0]
            if up_to_ms is not None and entry[0] > up_to_ms:
                break
            heapq.heappop(heap)
            time_ms, _, key, tag = entry
            if times.get((domain, key, tag)) != time_ms or (taken and taken[-1] == entry):
                continue  # moved, deleted, or a second entry of a timer set again
            taken.append(entry)
            due.append(Timer(domain=domain, key=key, tag=tag, time_ms=time_ms))
        for entry in taken:  # they stay pending until a commit deletes them
            heapq.heappush(heap, entry)
        return due

    def _drop_stale_top(self, domain: TimeDomain, heap: list[_Entry]) -> None:
        times = self._times
        while heap:
            time_ms, _, key, tag = heap[0]
            if times.get((domain, key, tag)) == time_ms:
                return
            heapq.heappop(heap)

    def _rebuild(self) -> None:
        heaps: dict[TimeDomain, list[_Entry]] = {d: [] for d in TimeDomain}
        for (domain, key, tag), time_ms in self._times.items():
            heaps[domain].append((time_ms, len(key), key, tag))
        for heap in heaps.values():
            heapq.heapify(heap)
        self._heaps = heaps
