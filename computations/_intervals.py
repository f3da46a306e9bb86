"""Key intervals: ranges of the 64-bit key-hash space, and the layouts they tile.

A computation's keys are hashed (:func:`key_hash`) into 64 bits. Its ``intervals = N``
are the N equal ranges of that space: ``KeyInterval(c, i, N)`` holds the keys whose
hash ``h`` has ``h * N >> 64 == i``. An interval splits into its two halves,
``(2i, 2n)`` and ``(2i + 1, 2n)``, and two halves of one interval merge back into it,
so every interval a computation ever has is an equal share of the space at some
count, the shares nest, and a layout of them is named by the same ``(index, count)``
the wire's ``KeyInterval`` carries. The store keeps state in key-hash order
(``engine/_state_layout.py``), so an interval's state is one range of store keys.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from millrace.computations._keys import key_hash

HASH_SPACE = 1 << 64
"""Hashes are in ``[0, HASH_SPACE)``."""
MAX_COUNT = 1 << 16
"""No split makes a share smaller than one in this many."""


def _boundary(index: int, count: int) -> int:
    """The least hash ``h`` with ``h * count >> 64 >= index``."""
    return -((-index * HASH_SPACE) // count)


@dataclass(frozen=True, slots=True)
class KeyInterval:
    """One key interval of a computation: share ``index`` of ``count`` equal shares of
    the key-hash space (``index < count``)."""

    computation: str
    index: int
    count: int

    @property
    def start(self) -> int:
        """The first hash in the interval."""
        return _boundary(self.index, self.count)

    @property
    def end(self) -> int:
        """The first hash after the interval (``HASH_SPACE`` for the last)."""
        return _boundary(self.index + 1, self.count)

    def holds_hash(self, hashed: int) -> bool:
        """Whether a key of hash ``hashed`` belongs to this interval."""
        return (hashed * self.count) >> 64 == self.index

    def holds(self, key: bytes) -> bool:
        """Whether ``key`` belongs to this interval."""
        return self.holds_hash(key_hash(key))

    def halves(self) -> tuple[KeyInterval, KeyInterval]:
        """The two intervals a split makes: the lower and the upper half of the range."""
        if self.count * 2 > MAX_COUNT:
            raise ValueError(f"{self} cannot split: no share is smaller than 1/{MAX_COUNT}")
        low = KeyInterval(self.computation, self.index * 2, self.count * 2)
        return low, KeyInterval(self.computation, low.index + 1, low.count)

    def whole(self, base_count: int) -> KeyInterval | None:
        """The interval whose half this one is, or None if it is one of the
        computation's ``base_count`` intervals (or finer than none of them)."""
        if self.count <= base_count or self.count % 2:
            return None
        return KeyInterval(self.computation, self.index // 2, self.count // 2)

    def other_half(self, base_count: int) -> KeyInterval | None:
        """The interval this one merges with (the other half of :meth:`whole`)."""
        if self.whole(base_count) is None:
            return None
        return KeyInterval(self.computation, self.index ^ 1, self.count)

    def id(self, base_count: int) -> int:
        """The interval's number among every interval its computation (of
        ``base_count`` first intervals) can have: a first interval's is its index; the
        ``base_count * 2**d`` intervals ``d`` splits deep are numbered on from
        ``base_count * (2**d - 1)``. What stores, leases and metrics name it by."""
        depth = (self.count // base_count).bit_length() - 1
        return base_count * ((1 << depth) - 1) + self.index

    @classmethod
    def of_id(cls, computation: str, ident: int, base_count: int) -> KeyInterval:
        """The interval numbered ``ident`` (inverse of :meth:`id`)."""
        if ident < 0:
            raise ValueError(f"{computation!r} has no interval {ident}")
        depth = (ident // base_count + 1).bit_length() - 1
        count = base_count << depth
        if count > MAX_COUNT:
            raise ValueError(f"{computation!r} has no interval {ident}")
        return cls(computation, ident - base_count * ((1 << depth) - 1), count)

    def named(self, base_count: int) -> IntervalId:
        """The name stores, leases, metrics, the wire and the CLI know it by."""
        return IntervalId(self.computation, self.id(base_count))

    def __str__(self) -> str:
        return f"{self.computation}[{self.index}/{self.count}]"


class IntervalId(NamedTuple):
    """A key interval as stores, leases, metrics, the wire and the CLI name it: its
    computation and its id (:meth:`KeyInterval.id`)."""

    computation: str
    id: int

    def interval(self, base_count: int) -> KeyInterval:
        """The range it names, for a computation of ``base_count`` first intervals."""
        return KeyInterval.of_id(self.computation, self.id, base_count)

    def __str__(self) -> str:
        return f"{self.computation}/{self.id}"


class Layout:
    """The intervals of one computation now, in hash order: they tile the hash space.

    Built from :meth:`base` (the topology's ``intervals = N``) and changed only by
    :meth:`split` and :meth:`merge`, each giving a new layout."""

    __slots__ = ("_starts", "base_count", "computation", "intervals")

    def __init__(self, computation: str, base_count: int, intervals: Iterable[KeyInterval]):
        """The ``intervals`` (any order) must tile the space, each a share of it at
        ``base_count`` or a count ``base_count`` times a power of two; ValueError
        otherwise."""
        self.computation = computation
        self.base_count = base_count
        self.intervals = tuple(sorted(intervals, key=lambda i: i.start))
        self._starts = [i.start for i in self.intervals]
        _check(self)

    @classmethod
    def base(cls, computation: str, count: int) -> Layout:
        """The ``count`` equal intervals a computation starts with."""
        return cls(computation, count, (KeyInterval(computation, i, count) for i in range(count)))

    @classmethod
    def of_ids(cls, computation: str, base_count: int, ids: Iterable[int]) -> Layout:
        """The layout of the intervals numbered ``ids`` (:meth:`KeyInterval.id`); the
        first ``base_count`` intervals when there are none."""
        found = [KeyInterval.of_id(computation, i, base_count) for i in ids]
        return cls(computation, base_count, found) if found else cls.base(computation, base_count)

    @property
    def uniform(self) -> int | None:
        """The count every interval shares (routing is then ``interval_of``), or None."""
        counts = {i.count for i in self.intervals}
        return counts.pop() if len(counts) == 1 else None

    def interval_for_hash(self, hashed: int) -> KeyInterval:
        """The interval that holds a key of hash ``hashed``."""
        return self.intervals[bisect_right(self._starts, hashed) - 1]

    def interval_for(self, key: bytes) -> KeyInterval:
        """The interval that holds ``key``."""
        return self.interval_for_hash(key_hash(key))

    def split(self, interval: KeyInterval) -> Layout:
        """This layout with ``interval`` replaced by its two halves."""
        self._require(interval)
        rest = (i for i in self.intervals if i != interval)
        return Layout(self.computation, self.base_count, (*rest, *interval.halves()))

    def merge(self, interval: KeyInterval) -> Layout:
        """This layout with ``interval`` and its other half replaced by their whole."""
        self._require(interval)
        whole, other = interval.whole(self.base_count), interval.other_half(self.base_count)
        if whole is None or other is None:
            raise ValueError(f"{interval} is one of {self.computation!r}'s first intervals")
        if other not in self.intervals:
            raise ValueError(f"{interval} cannot merge: its other half {other} is split")
        rest = (i for i in self.intervals if i not in (interval, other))
        return Layout(self.computation, self.base_count, (*rest, whole))

    def ids(self) -> list[int]:
        """Each interval's :meth:`KeyInterval.id`, in hash order."""
        return [i.id(self.base_count) for i in self.intervals]

    def split_ids(self) -> set[int]:
        """The ids of every interval that split on the way to this layout."""
        found = set()
        for interval in self.intervals:
            whole = interval.whole(self.base_count)
            while whole is not None:
                found.add(whole.id(self.base_count))
                whole = whole.whole(self.base_count)
        return found

    def routing_table(self) -> tuple[int, list[int]]:
        """``(finest, ids)``: the key of hash ``h`` belongs to interval
        ``ids[h * finest >> 64]`` (every interval is a whole number of the ``finest``
        equal shares)."""
        finest = max(i.count for i in self.intervals)
        ids: list[int] = []
        for interval in self.intervals:
            ids.extend([interval.id(self.base_count)] * (finest // interval.count))
        return finest, ids

    def _require(self, interval: KeyInterval) -> None:
        if interval not in self.intervals:
            raise ValueError(f"{interval} is not an interval of the layout now")

    def __iter__(self) -> Iterator[KeyInterval]:
        return iter(self.intervals)

    def __len__(self) -> int:
        return len(self.intervals)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.intervals == self.intervals

    def __hash__(self) -> int:
        return hash(self.intervals)

    def __repr__(self) -> str:
        return f"Layout({', '.join(map(str, self.intervals))})"


def _check(layout: Layout) -> None:
    """ValueError unless ``layout``'s intervals tile the space at allowed counts."""
    at = 0
    for interval in layout.intervals:
        if interval.computation != layout.computation:
            raise ValueError(f"{interval} is not an interval of {layout.computation!r}")
        ratio, rest = divmod(interval.count, layout.base_count)
        if rest or ratio & (ratio - 1) or not 0 <= interval.index < interval.count:
            raise ValueError(
                f"{interval} is no share of {layout.computation!r}'s "
                f"{layout.base_count} intervals or of their halves"
            )
        if interval.start != at:
            raise ValueError(f"the intervals of {layout.computation!r} leave a gap or overlap")
        at = interval.end
    if at != HASH_SPACE:
        raise ValueError(f"the intervals of {layout.computation!r} do not cover every key")
