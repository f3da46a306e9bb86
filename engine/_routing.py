"""Routing: records of a stream, as productions for each consuming interval.

Each record of a stream goes to every computation that reads that stream,
to the key interval that consumer's key extractor picks, or, when nobody
reads the stream, to its sink (``sink:<stream>``, one interval). The one
place that decides it, for what user code produced (:class:`ProductionRouter`)
and for source records (:func:`source_productions`: the injector's
forwarder, the test harness).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from computations import Topology, interval_of
from engine._frames import FrameBuilder
from engine._production_ids import Production, outbox_key_prefix, production_id
from engine._scope import Emitted
from millrace.wire.v1 import record_pb2

SINK_PREFIX = "sink:"
"""Consumer name of a sink stream's destination: ``sink:<stream>``, one interval."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where one consumer (or a sink) takes the records of one stream."""

    consumer: str
    intervals: int
    extract: Callable[[bytes, bytes], bytes]
    key_prefixes: tuple[bytes, ...]
    """Per target interval, the outbox-key prefix of productions sent there."""
    keyed_as_sent: bool = False
    """``extract`` is the record's own key (what native routing can hash by itself)."""

    @classmethod
    def to(
        cls,
        consumer: str,
        intervals: int,
        extract: Callable[[bytes, bytes], bytes],
        *,
        keyed_as_sent: bool = False,
    ) -> Route:
        """The route to ``consumer``'s ``intervals``, keyed by ``extract``."""
        prefixes = tuple(outbox_key_prefix(consumer, i) for i in range(intervals))
        return cls(consumer, intervals, extract, prefixes, keyed_as_sent)

    def interval_for(self, key: bytes, value: bytes) -> int:
        """The interval that takes a record. Unkeyable for this consumer (its extractor
        raises): interval 0, which dead-letters it with the extractor's error, where the
        operator looks for it."""
        if self.intervals == 1:
            return 0
        try:
            return interval_of(self.extract(key, value), self.intervals)
        except Exception:
            return 0


def _sink_key(key: bytes, value: bytes) -> bytes:
    return key


def routes_of(topology: Topology, stream: str) -> list[Route]:
    """Where records of ``stream`` go: each consumer, or the stream's sink."""
    consumers = topology.consumers(stream)
    if not consumers:
        return [Route.to(SINK_PREFIX + stream, 1, _sink_key, keyed_as_sent=True)]
    return [
        Route.to(
            c.name,
            c.intervals,
            topology.key_extractor(c.name, stream),
            keyed_as_sent=any(i.stream == stream and i.keyed_as_sent for i in c.inputs),
        )
        for c in consumers
    ]


def source_productions(routes: list[Route], record: record_pb2.Record) -> list[Production]:
    """``record`` of a source stream as one production per consumer (``routes`` are
    :func:`routes_of` its stream)."""
    return [
        Production.to(route.consumer, route.interval_for(record.key, record.value), record)
        for route in routes
    ]


class ProductionRouter:
    """Routes the output streams of one computation (its name goes in every record)."""

    def __init__(self, topology: Topology, computation: str) -> None:
        self._producer = computation
        self._routes = {
            stream: routes_of(topology, stream)
            for stream in topology.computations[computation].outputs
        }

    def route(self, emitted: list[Emitted], cause: bytes, frames: FrameBuilder) -> None:
        """Add to ``frames`` one production per emitted record and consuming interval.
        ``cause`` names what emitted them (an input record, a timer fire): the n-th
        record's id is :func:`~engine._production_ids.production_id` of it and n."""
        producer = self._producer
        add = frames.add
        for index, (stream, key, value, timestamp) in enumerate(emitted):
            record_id = production_id(cause, index)
            for route in self._routes[stream]:
                interval = 0 if route.intervals == 1 else route.interval_for(key, value)
                outbox_key = route.key_prefixes[interval] + record_id
                add(route.consumer, interval, outbox_key, record_id, key, value, timestamp,
                    producer, stream)  # fmt: skip
