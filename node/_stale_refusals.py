"""Receivers refusing an interval's deliveries as stale while the registry still leases it
here: a conflict the registry cannot see, said loudly rather than left a silent stall."""

from __future__ import annotations

from dataclasses import dataclass

from millrace.computations import IntervalId

PERSIST_S = 10.0
"""Refusals for longer than this (twice a lease) are no passing view of a newer owner."""
REPEAT_S = 60.0
"""How often the conflict is said again while it lasts."""
QUIET_S = 10.0
"""A pause in refusals this long ends a spell of them."""


@dataclass(slots=True)
class _Spell:
    first: float
    last: float
    said: float = float("-inf")


class StaleRefusals:
    """Per interval of this node: since when receivers refuse it as stale.

    A refusal is normal for a moment (a newer owner exists and the lease keeper is about
    to fence the interval); refusals that go on for :data:`PERSIST_S` while the interval
    is still not fenced mean a receiver saw an epoch the registry does not know (it lost
    its history): :meth:`note` then returns what to log, once every :data:`REPEAT_S`.
    """

    def __init__(self) -> None:
        self._spells: dict[IntervalId, _Spell] = {}

    def note(self, interval: IntervalId, epoch: int, message: str, now: float) -> str | None:
        """A refusal of ``interval`` (held at ``epoch``) at ``now`` (monotonic seconds);
        the conflict to log, or None."""
        spell = self._spells.get(interval)
        if spell is None or now - spell.last > QUIET_S:
            spell = self._spells[interval] = _Spell(first=now, last=now)
        spell.last = now
        if now - spell.first < PERSIST_S or now - spell.said < REPEAT_S:
            return None
        spell.said = now
        computation, index = interval
        return (
            f"lease conflict: receivers have refused {computation}/{index} epoch {epoch} as "
            f"stale for {now - spell.first:.0f} s while the registry still leases it to this "
            f"node ({message}): a receiver saw a newer epoch that the injector's registry "
            "does not know (it lost ownership.json, epochs.json and watermarks.json); the "
            "interval's outputs wait until an owner above that epoch registers"
        )
