"""The native framing of a commit's productions against a Python reference.

``ProductionRouter`` hands what user code emitted, per cause, to
``millrace.dataplane.ProductionPlan`` in one call. The reference below is the
framing as Python did it before: ids ``xxh3_128(cause | index u32)``, each consumer's
interval by ``Route.interval_for`` (the key's hash, or the consumer's own key
extractor), one protobuf ``DeliveryBatch`` per destination in order of its first
production. Both must give the same frames, byte for byte, and the same outbox keys,
on random commits over a topology with every kind of route.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xxhash import xxh3_128_digest

from millrace.computations import IntervalId, KeyInterval, Layout, Topology
from millrace.engine import Production, routes_of
from millrace.engine._routing import ProductionRouter
from millrace.engine._scope import Emitted
from millrace.wire.v1 import delivery_pb2

TOPOLOGY = """
[streams.src]
[streams.out]
[streams.side]

[computations.p]
handler = "tests.workloads:Forward"
inputs = { src = "key" }
outputs = ["out", "side"]

[computations.by_key]
handler = "tests.workloads:Forward"
intervals = 4
inputs = { out = "key" }
outputs = []

[computations.by_page]
handler = "tests.workloads:Forward"
intervals = 3
inputs = { out = "json:page" }
outputs = []

[computations.single]
handler = "tests.workloads:Forward"
inputs = { out = "json:page" }
outputs = []
"""
_U32 = struct.Struct(">I")


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Topology:
    path: Path = tmp_path_factory.mktemp("topology") / "t.toml"
    path.write_text(TOPOLOGY)
    return Topology.load(path)


def _split(layout: Layout, *shares: tuple[int, int]) -> Layout:
    for index, count in shares:
        layout = layout.split(KeyInterval(layout.computation, index, count))
    return layout


SPLIT = {
    "by_key": _split(Layout.base("by_key", 4), (1, 4), (3, 8), (0, 4)),
    "by_page": _split(Layout.base("by_page", 3), (2, 3)),
    "single": _split(Layout.base("single", 1), (0, 1), (1, 2)),
}
"""Consumers with some intervals split (ids above their first intervals')."""


def reference_frames(
    topology: Topology,
    caused: list[tuple[bytes, list[Emitted]]],
    layouts: dict[str, Layout] | None = None,
) -> list[tuple[bytes, list[bytes]]]:
    """``(payload, outbox keys)`` per destination, as the Python framing made them."""
    routes = {s: routes_of(topology, s, layouts) for s in topology.computations["p"].outputs}
    batches: dict[IntervalId, tuple[delivery_pb2.DeliveryBatch, list[bytes]]] = {}
    for cause, emitted in caused:
        for index, (stream, key, value, ts) in enumerate(emitted):
            record_id = xxh3_128_digest(cause + _U32.pack(index))
            for route in routes[stream]:
                interval = 0 if route.single else route.interval_for(key, value)
                entry = batches.get(IntervalId(route.consumer, interval))
                if entry is None:
                    batch = delivery_pb2.DeliveryBatch()
                    batch.target.computation = route.consumer
                    batch.target.index = interval
                    entry = batches[IntervalId(route.consumer, interval)] = (batch, [])
                entry[0].records.add(
                    record_id=record_id, key=key, value=value, event_time_ms=ts,
                    producer="p", stream=stream,
                )  # fmt: skip
                entry[1].append(route.key_prefix(interval) + record_id)
    return [(batch.SerializeToString(), keys) for batch, keys in batches.values()]


values = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b'{"page": "a"}', b'{"page": "b"}', b'{"page": 7}', b"[1]", b"{}"]),
)
emitted = st.builds(
    Emitted,
    st.sampled_from(["out", "side"]),
    st.binary(max_size=6),
    values,
    st.integers(-(2**62), 2**62),
)
commits = st.lists(
    st.tuples(st.binary(min_size=1, max_size=20), st.lists(emitted, max_size=5)), max_size=12
)


@pytest.mark.parametrize("layouts", [None, SPLIT], ids=["first-intervals", "split"])
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(caused=commits)
def test_native_frames_equal_the_python_framing(
    topology: Topology,
    layouts: dict[str, Layout] | None,
    caused: list[tuple[bytes, list[Emitted]]],
) -> None:
    built = ProductionRouter(topology, "p", layouts).builder()
    for cause, records in caused:
        built.add(cause, records)
    frames = built.frames(lambda keys: False)
    expected = reference_frames(topology, caused, layouts)
    assert [(f.payload, [p.outbox_key for p in f.productions]) for f in frames] == expected
    for frame in frames:
        for production in frame.productions:
            assert production == Production.to(frame.consumer, frame.interval, production.record)
        assert frame.oldest_event_time_ms == min(p.record.event_time_ms for p in frame.productions)
        if layouts is not None and frame.consumer == "by_key":
            layout = layouts["by_key"]
            for production in frame.productions:
                holder = layout.interval_for(production.record.key)
                assert holder.id(layout.base_count) == frame.interval


def test_kept_productions_are_framed_again_without_the_others(topology: Topology) -> None:
    built = ProductionRouter(topology, "p").builder()
    built.add(b"cause", [Emitted("out", b"k", b'{"page": "a"}', 5)] * 3)
    every = built.productions
    dropped = {every[0].outbox_key}
    frames = built.frames(lambda keys: not dropped.isdisjoint(keys))
    kept = [p for f in frames for p in f.productions]
    assert kept == every[1:]
    for frame in frames:
        encoded = delivery_pb2.DeliveryBatch.FromString(frame.encoded())
        assert list(encoded.records) == [p.record for p in frame.productions]


def test_a_stream_that_is_not_an_output_is_refused(topology: Topology) -> None:
    built = ProductionRouter(topology, "p").builder()
    built.add(b"cause", [Emitted("src", b"k", b"v", 5)])
    with pytest.raises(ValueError, match="not an output stream"):
        built.built()
