"""``OldestInFlight``: the oldest event time among unacknowledged productions."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Iterable
from itertools import repeat


class OldestInFlight:
    """Unacknowledged productions, in groups (an outbox frame, or one commit's worth).

    Each group keeps the smallest event timestamp of its productions and how
    many are still unacknowledged; the oldest in-flight timestamp is the
    minimum over live groups (a handful), so acks cost a dict pop and a
    decrement. A group's minimum does not rise as its members are acked: the
    watermark is held a little longer, never too little.
    """

    def __init__(self) -> None:
        self._group_of: dict[bytes, Hashable] = {}
        self._groups: dict[Hashable, list[float]] = {}  # group -> [min ts, live, added at]

    def add_keys(self, keys: list[bytes], oldest_ms: int | None, group: Hashable) -> None:
        """Track productions ``keys`` as one group whose oldest event time is
        ``oldest_ms``, named ``group``; keys already tracked stay in their first group
        (then the group keeps ``oldest_ms``: held a little longer, never too little)."""
        group_of = self._group_of
        before = len(group_of)
        if group_of.keys().isdisjoint(keys):
            group_of.update(dict.fromkeys(keys, group))
        else:
            group_of.update(dict.fromkeys([k for k in keys if k not in group_of], group))
        count = len(group_of) - before
        if count and oldest_ms is not None:
            self._groups[group] = [oldest_ms, count, time.monotonic()]

    def tracks_any(self, keys: list[bytes]) -> bool:
        """True when any of ``keys`` is unacknowledged here."""
        return not self._group_of.keys().isdisjoint(keys)

    def remove_many(self, keys: Iterable[bytes]) -> list[Hashable]:
        """Forget acknowledged productions (one ack's, in C-level passes); returns the
        names of the groups whose last live member was among them (untracked keys are
        ignored)."""
        emptied = Counter(map(self._group_of.pop, keys, repeat(None)))
        emptied.pop(None, None)
        finished = []
        groups = self._groups
        for group, count in emptied.items():
            entry = groups[group]
            entry[1] -= count
            if entry[1] <= 0:
                del groups[group]
                finished.append(group)
        return finished

    def __len__(self) -> int:
        return len(self._group_of)

    def oldest(self) -> int | None:
        """The smallest tracked timestamp, or None when nothing is in flight."""
        if not self._groups:
            return None
        return int(min(entry[0] for entry in list(self._groups.values())))

    def oldest_age_s(self) -> float:
        """Seconds the longest-waiting production has been unacknowledged (0 if none)."""
        for entry in list(self._groups.values()):
            return time.monotonic() - entry[2]
        return 0.0
