"""The senders an interval answers for after a split or a merge retired them.

Receivers forget a record id only once its sender's floor passed the position it was
delivered at (``statestore/_dedup_progress.py``). A split or a merge retires the
names of intervals: the store that takes their outbox (the lower half; the merged
whole) sends its frames on under its own name, and the retired name's floor would
stay where it was at every receiver, keeping the dedup segments it delivered into for
good.

So that store remembers (store metadata ``retired-senders``), per retired interval
id, the floor receivers may take for it -- the retired store's next frame number: the
name never sent anything at or above it -- and the number below which every frame it
inherited lies (its own next frame when it was made). Once no inherited frame waits
for an ack, nobody can send anything under a retired name again: its node tells every
receiver the floors, speaking as itself (``node/_retired_senders.py``), then forgets
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from millrace.statestore import StateStore

RETIRED_SENDERS = "retired-senders"
"""Store metadata: ``{"through": n, "floors": [[interval id, floor], ...]}``."""


@dataclass(frozen=True, slots=True)
class RetiredSenders:
    """What a store answers for: retired interval id -> its floor (its next frame number
    when it retired), which receivers may take once no frame numbered below ``through``
    (inherited) awaits an ack."""

    through: int = 0
    floors: Mapping[int, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        """As stored."""
        rows = sorted(self.floors.items())
        return json.dumps({"through": self.through, "floors": rows}).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> RetiredSenders:
        """As :meth:`encode` stored it (empty for None)."""
        if not raw:
            return cls()
        body = json.loads(raw)
        return cls(int(body["through"]), {int(i): int(f) for i, f in body["floors"]})

    def joined(self, other: RetiredSenders, *, through: int) -> RetiredSenders:
        """Both stores' retired senders (the higher of a name in both), every inherited
        frame below ``through``."""
        floors = dict(self.floors)
        for index, floor in other.floors.items():
            floors[index] = max(floor, floors.get(index, floor))
        return RetiredSenders(max(through, self.through, other.through), floors)

    def without(self, told: Mapping[int, int]) -> RetiredSenders:
        """Without the names whose floors (``told``) every receiver took."""
        floors = {i: f for i, f in self.floors.items() if told.get(i) != f}
        return RetiredSenders(self.through, floors)


def retired_senders(store: StateStore) -> RetiredSenders:
    """What ``store`` answers for (nothing, for most stores)."""
    return RetiredSenders.decode(store.get_meta(RETIRED_SENDERS))
