"""A sender's positions: what its receivers may forget record ids by.

A frame carries the ``(first, last)`` positions of its productions in its
sender's sequence; the sender tells receivers a *floor*, the lowest first
position it still holds unacknowledged, below which it resends nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from millrace.engine import Frame


class Positions:
    """A multiset of first positions: what one group still holds, and its minimum."""

    __slots__ = ("_counts", "_heap")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._heap: list[int] = []

    def add(self, positions: tuple[int, int] | None) -> None:
        if positions is None:
            return  # unnumbered: no floor is sent for its group (see _requests)
        first = positions[0]
        count = self._counts.get(first, 0)
        if not count:
            heapq.heappush(self._heap, first)
        self._counts[first] = count + 1

    def remove(self, positions: tuple[int, int] | None) -> None:
        if positions is None:
            return
        first = positions[0]
        count = self._counts.get(first, 0) - 1
        if count > 0:
            self._counts[first] = count
        else:
            self._counts.pop(first, None)

    def floor(self) -> int | None:
        """The lowest position still held (every lower one is acknowledged); None if none."""
        heap = self._heap
        while heap and heap[0] not in self._counts:
            heapq.heappop(heap)
        return heap[0] if heap else None


def span_of(frames: Sequence[Frame]) -> tuple[int, int] | None:
    """``(lowest first, highest last)`` of the frames, None if any is not numbered."""
    if any(frame.positions is None for frame in frames):
        return None
    return (
        min(f.positions[0] for f in frames if f.positions),
        max(f.positions[1] for f in frames if f.positions),
    )
