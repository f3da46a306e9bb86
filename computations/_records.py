"""What user code receives: records and fired timers."""

from __future__ import annotations

from typing import NamedTuple

from millrace.statestore.types import TimeDomain


class Record(NamedTuple):
    """One record of a stream as a computation sees it.

    ``key`` is the key the consuming computation's key extractor gave the
    record (state and timers are scoped to it); ``record_id`` is unique per
    record and stable across redeliveries.
    """

    stream: str
    key: bytes
    value: bytes
    event_time_ms: int
    record_id: bytes = b""
    producer: str = ""


class FiredTimer(NamedTuple):
    """A timer that fired: the key it belongs to, its tag, its time and its clock.

    A named tuple, like :class:`Record`: the engine makes one per fire."""

    key: bytes
    tag: str
    time_ms: int
    domain: TimeDomain
