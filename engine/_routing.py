"""Routing: records of a stream, as productions for each consuming interval.

Each record of a stream goes to every computation that reads that stream,
to the key interval that consumer's key extractor picks, or, when nobody
reads the stream, to its sink (``sink:<stream>``, one interval). The one
place that decides it, for what user code produced (:class:`ProductionRouter`)
and for source records (:func:`source_productions`: the injector's
forwarder, the test harness).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from millrace.computations import Layout, Topology, interval_of, intervals_of
from millrace.dataplane import ProductionPlan
from millrace.engine._batch_keys import batch_key_reader
from millrace.engine._frames import FRAME_BYTES, Frame
from millrace.engine._production_ids import Production, outbox_key_prefix
from millrace.engine._scope import Emitted
from millrace.wire.v1 import record_pb2

SINK_PREFIX = "sink:"
"""Consumer name of a sink stream's destination: ``sink:<stream>``, one interval."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where one consumer (or a sink) takes the records of one stream."""

    consumer: str
    intervals: int
    """The consumer's first intervals: records hash into that many equal ranges..."""
    extract: Callable[[bytes, bytes], bytes]
    keyed_as_sent: bool = False
    """``extract`` is the record's own key (what native routing can hash by itself)."""
    table: tuple[int, ...] = ()
    """...unless some were split: then the interval id of each of ``len(table)`` equal
    ranges (:meth:`computations.Layout.routing_table`)."""

    @classmethod
    def to(
        cls,
        consumer: str,
        intervals: int,
        extract: Callable[[bytes, bytes], bytes],
        *,
        keyed_as_sent: bool = False,
        layout: Layout | None = None,
    ) -> Route:
        """The route to ``consumer``'s ``intervals`` (or, split, its ``layout``), keyed by
        ``extract``."""
        table: tuple[int, ...] = ()
        if layout is not None and layout.uniform != intervals:
            table = tuple(layout.routing_table()[1])
        return cls(consumer, intervals, extract, keyed_as_sent, table)

    def key_prefix(self, interval: int) -> bytes:
        """The outbox-key prefix of productions sent to ``interval`` (an id)."""
        return outbox_key_prefix(self.consumer, interval)

    def interval_for(self, key: bytes, value: bytes) -> int:
        """The interval (by id) that takes a record. Unkeyable for this consumer (its
        extractor raises): the first, which dead-letters it with the extractor's error,
        where the operator looks for it."""
        table = self.table
        if not table:
            if self.intervals == 1:
                return 0
            try:
                return interval_of(self.extract(key, value), self.intervals)
            except Exception:
                return 0
        try:
            return table[interval_of(self.extract(key, value), len(table))]
        except Exception:
            return table[0]

    def intervals_for(self, keys: Sequence[bytes], values: Sequence[bytes]) -> list[int]:
        """:meth:`interval_for` of each record; the keys read a batch at a time where the
        extractor can (``json:FIELD``, natively), the rest one by one."""
        many = batch_key_reader(self.extract)
        if many is None or self.single:
            return list(map(self.interval_for, keys, values))
        read = many(values if isinstance(values, list) else list(values))
        table = self.table
        hashed = iter(
            intervals_of([k for k in read if k is not None], len(table) or self.intervals)
        )
        if table:
            hashed = map(table.__getitem__, hashed)
        return [
            next(hashed) if k is not None else self.interval_for(key, value)
            for key, value, k in zip(keys, values, read, strict=True)
        ]

    @property
    def ids(self) -> list[int]:
        """Every interval (by id) the route may send to."""
        return sorted(set(self.table)) if self.table else list(range(self.intervals))

    @property
    def single(self) -> bool:
        """Whether the consumer has one interval (every record goes to it)."""
        return self.intervals == 1 and not self.table


def _sink_key(key: bytes, value: bytes) -> bytes:
    return key


def routes_of(
    topology: Topology, stream: str, layouts: Mapping[str, Layout] | None = None
) -> list[Route]:
    """Where records of ``stream`` go: each consumer (into its intervals now, from
    ``layouts``: the first ones for a consumer not there), or the stream's sink."""
    consumers = topology.consumers(stream)
    if not consumers:
        return [Route.to(SINK_PREFIX + stream, 1, _sink_key, keyed_as_sent=True)]
    return [
        Route.to(
            c.name,
            c.intervals,
            topology.key_extractor(c.name, stream),
            keyed_as_sent=any(i.stream == stream and i.keyed_as_sent for i in c.inputs),
            layout=None if layouts is None else layouts.get(c.name),
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
    """Routes the output streams of one computation (its name goes in every record).

    What user code emitted is framed natively, a commit at a time
    (:class:`millrace.dataplane.ProductionPlan`): production ids, each consumer's
    interval (by the hash of the record's key, or, for a consumer with a key extractor
    of its own, the interval :meth:`Route.interval_for` gives), one ``DeliveryBatch``
    frame per destination (several, in order, for records past :data:`FRAME_BYTES`)."""

    def __init__(
        self, topology: Topology, computation: str, layouts: Mapping[str, Layout] | None = None
    ) -> None:
        """``layouts``: the consumers' intervals now (the first ones for any not there)."""
        routes = {
            stream: routes_of(topology, stream, layouts)
            for stream in topology.computations[computation].outputs
        }
        self.consumers = tuple(dict.fromkeys(r.consumer for rs in routes.values() for r in rs))
        index = {name: i for i, name in enumerate(self.consumers)}
        self.given = {
            stream: given
            for stream, rs in routes.items()
            if (given := tuple(r for r in rs if _given(r)))
        }
        """Per stream, the routes whose interval Python picks (their own key extractor)."""
        self.plan = ProductionPlan(
            computation,
            self.consumers,
            [
                (stream, [(index[r.consumer], r.intervals, _given(r), list(r.table)) for r in rs])
                for stream, rs in routes.items()
            ],
            frame_bytes=FRAME_BYTES,
        )

    def builder(self) -> FrameBuilder:
        """A new commit's productions."""
        return FrameBuilder(self)


def _given(route: Route) -> bool:
    return not route.single and not route.keyed_as_sent


class FrameBuilder:
    """One commit's productions: what user code emitted, per cause, framed in one native
    call when first asked for (``cause`` names what emitted them, an input record or a
    timer fire: the n-th record's id is ``xxh3_128(cause | n)``, see
    :mod:`engine._production_ids`)."""

    __slots__ = ("_built", "_causes", "_emitted", "_given", "_router")

    def __init__(self, router: ProductionRouter) -> None:
        self._router = router
        self._causes: list[bytes] = []
        self._emitted: list[list[Emitted]] = []
        self._given: list[tuple[Route, bytes, bytes]] = []
        """The records whose interval Python picks, with their routes, in order."""
        self._built: list[Frame] | None = None

    def add(self, cause: bytes, emitted: list[Emitted]) -> None:
        """What ``cause`` emitted, in order."""
        self._causes.append(cause)
        self._emitted.append(emitted)
        self._built = None
        if self._router.given:
            given = self._router.given
            for stream, key, value, _ in emitted:
                for route in given.get(stream, ()):
                    self._given.append((route, key, value))

    def built(self) -> list[Frame]:
        """The frames, in order of their first production: one per destination, or
        several in order where its records pass :data:`FRAME_BYTES`."""
        if self._built is None:
            consumers = self._router.consumers
            self._built = [
                Frame(consumers[c], interval, None, payload, outbox_keys=keys,
                      oldest_event_time_ms=oldest)
                for c, interval, payload, keys, oldest in self._router.plan.frames(
                    self._causes, self._emitted, _given_intervals(self._given)
                )
            ]  # fmt: skip
        return self._built

    def __len__(self) -> int:
        """How many productions (a record emitted to two consumers counts twice)."""
        return sum(len(frame) for frame in self.built())

    @property
    def productions(self) -> list[Production]:
        """Every production, destination by destination, each in the order made."""
        return [p for frame in self.built() for p in frame.productions]

    def frames(self, skip: Callable[[list[bytes]], bool]) -> list[Frame]:
        """:meth:`built`'s frames without the productions ``skip`` says (given a
        frame's outbox keys, True when any is to be skipped; then it is asked again for
        each key alone): encoded as built when it keeps them all."""
        frames = []
        for frame in self.built():
            if not skip(frame.outbox_keys):
                frames.append(frame)
                continue
            kept = [p for p in frame.productions if not skip([p.outbox_key])]
            if kept:
                frames.append(Frame(frame.consumer, frame.interval, kept, None))
        return frames


def _given_intervals(given: list[tuple[Route, bytes, bytes]]) -> list[int]:
    """The interval of each ``(route, key, value)``: a route's records at once
    (:meth:`Route.intervals_for`)."""
    if not given:
        return []
    places: dict[int, tuple[Route, list[int]]] = {}
    for at, (route, _, _) in enumerate(given):
        places.setdefault(id(route), (route, []))[1].append(at)
    intervals = [0] * len(given)
    for route, ats in places.values():
        keys = [given[at][1] for at in ats]
        values = [given[at][2] for at in ats]
        for at, interval in zip(ats, route.intervals_for(keys, values), strict=True):
            intervals[at] = interval
    return intervals


def reroute(
    frames: Iterable[Frame], topology: Topology, layouts: Mapping[str, Layout]
) -> list[Frame]:
    """Frames for an interval that is gone (split), as frames for the intervals that hold
    their records now (by ``layouts``). Each production keeps its identity (outbox key),
    each new frame its old frame's positions: a sender's floor never passes what it
    still has to deliver."""
    routes: dict[tuple[str, str], Route] = {}
    rerouted: list[Frame] = []
    for frame in frames:
        by_target: dict[int, list[Production]] = {}
        for production in frame.productions:
            record = production.record
            route = routes.get((record.stream, frame.consumer))
            if route is None:
                for each in routes_of(topology, record.stream, layouts):
                    routes[(record.stream, each.consumer)] = each
                route = routes[(record.stream, frame.consumer)]
            target = route.interval_for(record.key, record.value)
            by_target.setdefault(target, []).append(production._replace(interval=target))
        rerouted.extend(
            Frame(frame.consumer, target, productions, positions=frame.positions)
            for target, productions in by_target.items()
        )
    return rerouted
