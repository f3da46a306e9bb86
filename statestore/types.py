"""Value types the store reads and writes."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

MAX_EPOCH = 2**53
"""No epoch at or above this is ever claimed, granted or believed: far beyond any real count
of restarts, far below the int64 limit, so a forged epoch near the limit can never win."""


class TimeDomain(enum.IntEnum):
    """Which clock a timer follows."""

    EVENT_TIME = 1
    """Fires when the computation's input low watermark passes the timer."""
    PROCESSING_TIME = 2
    """Fires when the node's wall clock passes the timer."""


class Timer(NamedTuple):
    """A timer of one key. ``(domain, key, tag)`` identifies it; setting it again moves it.

    ``cause``: opaque bytes kept with the timer, from whoever set it (the engine names
    the timer's fire by them); setting a timer again to the time it has keeps its
    cause. Timers of a store of format 2 have none. A named tuple: the engine makes
    one per timer it fires or sets."""

    domain: TimeDomain
    key: bytes
    tag: str
    time_ms: int
    cause: bytes = b""


@dataclass(frozen=True, slots=True)
class DedupStats:
    """Counters of the dedup index since the store opened.

    ``lookups`` ids were checked; ``bloom_negatives`` were answered by the
    Bloom filters alone; the rest went to RocksDB, where ``confirmations``
    were real duplicates and ``false_positives`` were not.
    """

    lookups: int
    bloom_negatives: int
    confirmations: int
    false_positives: int
    segments: int
    filters: int


@dataclass(frozen=True, slots=True)
class SenderProgress:
    """What one delivery says of its sender's progress, in the sender's own positions.

    ``sender`` names the position sequence (which interval's outbox, which
    source stream's log); ``floor``: the sender will never send a position
    below it again; ``last``: the highest position in the delivery. Ids the
    delivery brings are forgotten only once the sender's floor passes ``last``.
    """

    sender: bytes
    floor: int
    last: int
