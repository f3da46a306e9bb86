"""Which dedup segments a sender may still retry into: the sender-progress book.

A record id may be forgotten only once no sender can resend it (MillWheel).
Senders that number what they send (an interval's outbox frames, a source
stream's log offsets: *positions*, increasing in the order first sent) tell
each delivery its ``last`` position and their ``floor``: they will never
send a position below it again, having had everything below it
acknowledged. The book keeps, per dedup segment, the highest position each
such sender delivered into it, and per sender the highest floor it reported.
A segment is *released* once every sender that delivered into it has a floor
past what it delivered: only then may its ids go, however much time passed.

Both are committed with the ids they cover (store metadata, in the same
write batch), so a restart resumes with them:

- ``\\x00dedup-floor\\x00 | sender`` -> floor (u64)
- ``\\x00dedup-seg\\x00 | segment (u64) | sender`` -> last position (u64)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from millrace.statestore._engine import Batch, Column, Engine
from millrace.statestore._keys import prefix_end, reserved_meta_key
from millrace.statestore.types import SenderProgress

_U64 = struct.Struct(">Q")
_FLOOR = reserved_meta_key("dedup-floor") + b"\x00"
_SEGMENT = reserved_meta_key("dedup-seg") + b"\x00"


@dataclass(slots=True)
class StagedProgress:
    """What one commit adds to the book, applied once it is durable."""

    segment: int
    floors: dict[bytes, int] = field(default_factory=dict)
    delivered: dict[bytes, int] = field(default_factory=dict)


class ProgressBook:
    """Floors per sender and delivered positions per segment (see the module docstring)."""

    def __init__(self) -> None:
        self._floors: dict[bytes, int] = {}
        self._delivered: dict[int, dict[bytes, int]] = {}

    def load(self, engine: Engine) -> None:
        """Read the book back from the store's metadata."""
        self._floors.clear()
        self._delivered.clear()
        for key, value in engine.scan(Column.META, _FLOOR, prefix_end(_FLOOR)):
            self._floors[key[len(_FLOOR) :]] = _U64.unpack(value)[0]
        for key, value in engine.scan(Column.META, _SEGMENT, prefix_end(_SEGMENT)):
            segment = _U64.unpack_from(key, len(_SEGMENT))[0]
            sender = key[len(_SEGMENT) + 8 :]
            self._delivered.setdefault(segment, {})[sender] = _U64.unpack(value)[0]

    def released(self, segment: int) -> bool:
        """True when no sender that delivered into ``segment`` can still resend into it."""
        delivered = self._delivered.get(segment)
        if not delivered:
            return True
        floors = self._floors
        return all(floors.get(sender, -1) > last for sender, last in delivered.items())

    def stage(self, batch: Batch, segment: int, marks: Iterable[SenderProgress]) -> StagedProgress:
        """Write what ``marks`` (the commit's deliveries) add: higher floors, and the highest
        position each sender delivered into ``segment``."""
        staged = StagedProgress(segment)
        delivered = self._delivered.get(segment, {})
        for mark in marks:
            sender = mark.sender
            floor = max(mark.floor, staged.floors.get(sender, -1))
            if floor > self._floors.get(sender, -1):
                staged.floors[sender] = floor
            last = max(mark.last, staged.delivered.get(sender, -1))
            if last > delivered.get(sender, -1):
                staged.delivered[sender] = last
        for sender, floor in staged.floors.items():
            batch.put(Column.META, _FLOOR + sender, _U64.pack(floor))
        prefix = _SEGMENT + _U64.pack(segment)
        for sender, last in staged.delivered.items():
            batch.put(Column.META, prefix + sender, _U64.pack(last))
        return staged

    def stage_forget(self, batch: Batch, segment: int) -> None:
        """Delete what the book holds of ``segment`` (it expires in the same batch)."""
        batch.delete_range(
            Column.META, _SEGMENT + _U64.pack(segment), _SEGMENT + _U64.pack(segment + 1)
        )

    def apply(self, staged: StagedProgress, forgotten: Iterable[int]) -> None:
        """The batch of :meth:`stage` (and :meth:`stage_forget`) committed."""
        self._floors.update(staged.floors)
        if staged.delivered:
            self._delivered.setdefault(staged.segment, {}).update(staged.delivered)
        for segment in forgotten:
            self._delivered.pop(segment, None)

    def floor(self, sender: bytes) -> int | None:
        """The highest floor ``sender`` reported (None: never)."""
        return self._floors.get(sender)

    def marks(self) -> list[SenderProgress]:
        """Everything the book holds, as marks a commit of another store can note: per
        sender and segment delivered into, its floor and the last position."""
        return [
            SenderProgress(sender, self._floors.get(sender, 0), last)
            for delivered in self._delivered.values()
            for sender, last in delivered.items()
        ]

    def held(self) -> list[int]:
        """The segments some sender may still resend into (not :meth:`released`)."""
        return sorted(s for s in self._delivered if not self.released(s))

    def delivered(self, segment: int) -> dict[bytes, int]:
        """Per sender, the highest position it delivered into ``segment`` (for inspection)."""
        return dict(self._delivered.get(segment, {}))
