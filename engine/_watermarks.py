"""Low-watermark arithmetic over a topology (pure; the authority and the harness share it).

``LW(C) = min(oldest unfinished work of C, input watermark of C)`` and the
input watermark of C is the minimum over its input streams of: the source
watermark (a source stream) or ``LW`` of the stream's producers. Event-time
timers of C fire on its *input* watermark; C's own pending timers hold back
only ``LW(C)``, which is what C's consumers see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from millrace.computations import MAX_TIME, MIN_TIME, Topology


def saturate(ms: int) -> int:
    """``ms`` clamped into int64 (``MIN_TIME .. MAX_TIME``): watermark arithmetic on any
    value, even one read back from an old journal, can never overflow a wire field."""
    return MIN_TIME if ms < MIN_TIME else MAX_TIME if ms > MAX_TIME else ms


SOURCE_PREFIX = "source:"
"""Published name prefix of a source stream's watermark: ``source:<stream>``."""


def source_name(stream: str) -> str:
    """The published name of the watermark of source ``stream``."""
    return SOURCE_PREFIX + stream


def feeders(topology: Topology, computation: str) -> list[str]:
    """Published names of what directly feeds ``computation``: its source streams
    (``source:<stream>``) and the computations producing the streams it reads."""
    names: list[str] = []
    for stream in topology.computations[computation].input_streams():
        producers = topology.producers(stream)
        if not producers:
            names.append(source_name(stream))
        names.extend(p.name for p in producers)
    return names


def input_watermark(
    topology: Topology, computation: str, published: Mapping[str, int]
) -> int | None:
    """The watermark the event-time timers of ``computation`` fire on: the minimum of the
    published watermarks feeding it (None while any of them is unknown)."""
    values = [published.get(name) for name in feeders(topology, computation)]
    known = [v for v in values if v is not None]
    return min(known) if known and len(known) == len(values) else None


@dataclass(frozen=True, slots=True)
class ComputationWatermark:
    """The input watermark a computation's timers fire on, and its own low watermark."""

    input_ms: int
    low_ms: int


def compute_watermarks(
    topology: Topology,
    source_watermarks: Mapping[str, int],
    oldest_work: Mapping[str, int | None],
) -> dict[str, ComputationWatermark]:
    """Watermarks of every computation.

    ``source_watermarks``: per source stream (missing: MIN_TIME).
    ``oldest_work``: per computation, the oldest event time its intervals
    still hold (None or missing: none).
    """
    result: dict[str, ComputationWatermark] = {}

    def resolve(name: str) -> ComputationWatermark:
        if name in result:
            return result[name]
        spec = topology.computations[name]
        input_ms = MAX_TIME
        for stream in spec.input_streams():
            producers = topology.producers(stream)
            if not producers:
                input_ms = min(input_ms, source_watermarks.get(stream, MIN_TIME))
            for producer in producers:
                input_ms = min(input_ms, resolve(producer.name).low_ms)
        work = oldest_work.get(name)
        low_ms = input_ms if work is None else min(input_ms, work)
        result[name] = ComputationWatermark(input_ms=input_ms, low_ms=low_ms)
        return result[name]

    for name in topology.computations:
        resolve(name)
    return result
