"""Routing: what one call of user code produced, as productions for each consuming interval.

Each record produced to a stream goes to every computation that reads that
stream, to the key interval that consumer's key extractor picks, or, when
nobody reads the stream, to its sink (``sink:<stream>``, one interval).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from computations import Topology, interval_of
from engine._outbox import FrameBuilder, outbox_key_prefix, production_id
from engine._scope import Emitted

SINK_PREFIX = "sink:"
"""Consumer name of a sink stream's destination: ``sink:<stream>``, one interval."""


@dataclass(frozen=True, slots=True)
class _Route:
    consumer: str
    intervals: int
    extract: Callable[[bytes, bytes], bytes]
    key_prefixes: tuple[bytes, ...]
    """Per target interval, the outbox-key prefix of productions sent there."""

    @classmethod
    def to(cls, consumer: str, intervals: int, extract: Callable[[bytes, bytes], bytes]) -> _Route:
        prefixes = tuple(outbox_key_prefix(consumer, i) for i in range(intervals))
        return cls(consumer, intervals, extract, prefixes)


def _sink_key(key: bytes, value: bytes) -> bytes:
    return key


def _routes(topology: Topology, stream: str) -> list[_Route]:
    """Where records of ``stream`` go: each consumer, or the stream's sink."""
    consumers = topology.consumers(stream)
    if not consumers:
        return [_Route.to(SINK_PREFIX + stream, 1, _sink_key)]
    return [
        _Route.to(c.name, c.intervals, topology.key_extractor(c.name, stream)) for c in consumers
    ]


class ProductionRouter:
    """Routes the output streams of one computation (its name goes in every record)."""

    def __init__(self, topology: Topology, computation: str) -> None:
        self._producer = computation
        self._routes = {
            stream: _routes(topology, stream)
            for stream in topology.computations[computation].outputs
        }

    def route(self, emitted: list[Emitted], cause: bytes, frames: FrameBuilder) -> None:
        """Add to ``frames`` one production per emitted record and consuming interval.
        ``cause`` names what emitted them (an input record, a timer fire): the n-th
        record's id is :func:`~engine._outbox.production_id` of it and n."""
        producer = self._producer
        add = frames.add
        for index, (stream, key, value, timestamp) in enumerate(emitted):
            record_id = production_id(cause, index)
            for route in self._routes[stream]:
                interval = 0
                if route.intervals > 1:
                    # Unkeyable for that consumer: it goes to interval 0, which dead-letters
                    # it with the extractor's error, where the operator looks for it.
                    with suppress(Exception):
                        interval = interval_of(route.extract(key, value), route.intervals)
                outbox_key = route.key_prefixes[interval] + record_id
                add(route.consumer, interval, outbox_key, record_id, key, value, timestamp,
                    producer, stream)  # fmt: skip
