"""A commit that never runs a key past a timer set for it earlier in the same commit.

Under a perfect watermark (a backfill), a timer at ``T`` fires after its key's
records at or before ``T`` and before those after it. A node cannot promise
that (its watermark comes when it comes), but a backfill can, if a commit stops
a key at the first timer one of its own records set: the key's later records are
handed back (``BatchOutcome.retry``), the caller moves the watermark to them,
the timer fires, and they come again. Other keys go on: state and timers are a
key's own, so cutting one key's run costs nothing to the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from millrace.statestore.types import TimeDomain

TimerChanges = Mapping[tuple[TimeDomain, str], int | None]
"""One call's timer changes: ``(domain, tag)`` -> its time, or None (deleted)."""


class TimerCuts:
    """The timers each key set so far in one commit, and which of its records must wait."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set: dict[bytes, dict[tuple[TimeDomain, str], int]] = {}

    def waits(self, key: bytes, event_time_ms: int) -> bool:
        """Whether ``key``'s record at ``event_time_ms`` must wait for a timer of its key
        set earlier in this commit (one before its time: it fires first)."""
        timers = self._set.get(key)
        return timers is not None and bool(timers) and event_time_ms > min(timers.values())

    def note(self, key: bytes, changes: TimerChanges) -> None:
        """What one call for ``key`` did to its timers (a timer deleted no longer cuts)."""
        if not changes:
            return
        timers = self._set.setdefault(key, {})
        for ident, time_ms in changes.items():
            if time_ms is None:
                timers.pop(ident, None)
            else:
                timers[ident] = time_ms

    def keys_run_past(self, taken: Iterable[tuple[bytes, int]]) -> set[bytes]:
        """The keys among ``taken`` ((key, event time) of the records a batch call
        took) that have a record after a timer the call set for them: their run is
        undone and made again record by record."""
        return {key for key, time_ms in taken if self.waits(key, time_ms)}
