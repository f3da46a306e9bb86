"""The records of delivered batches read natively (``Received.decode``) equal protobuf's
reading of the same bytes, field for field, and their shape equals a plain computation
of it, for any batches split over any number of messages."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from millrace.computations import interval_of
from millrace.engine._received import Received, Shape, UndecodableRequestError
from millrace.wire.v1 import delivery_pb2, record_pb2

records = st.lists(
    st.builds(
        record_pb2.Record,
        record_id=st.sampled_from([b"", b"a", b"b", b"c", b"\x00" * 16]),
        key=st.binary(max_size=6),
        value=st.binary(max_size=10),
        event_time_ms=st.integers(-(2**63), 2**63 - 1),
        producer=st.sampled_from(["injector", "agg", "é"]),
        stream=st.sampled_from(["events", "other", ""]),
    ),
    max_size=12,
)


def _reference_shape(rs: list[record_pb2.Record], interval: int, intervals: int) -> Shape:
    ids = [r.record_id for r in rs]
    times = [r.event_time_ms for r in rs]
    return Shape(
        ids_distinct=all(ids) and len(set(ids)) == len(ids),
        one_stream=len({r.stream for r in rs}) <= 1,
        min_event_ms=min(times, default=0),
        max_event_ms=max(times, default=0),
        keys_in_interval=sum(
            1 for r in rs if intervals <= 1 or interval_of(r.key, intervals) == interval
        ),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(records, max_size=4), st.sampled_from([(0, 1), (0, 2), (1, 2), (2, 3)]))
def test_native_reading_equals_protobufs(
    batches: list[list[record_pb2.Record]], layout: tuple[int, int]
) -> None:
    interval, intervals = layout
    wires = []
    for i, rs in enumerate(batches):
        batch = delivery_pb2.DeliveryBatch(batch_seq=i + 1, target_epoch=3, records=rs)
        batch.sender.sender_id = "s"
        batch.target.computation = "agg"
        wires.append(batch.SerializeToString())
    got = Received.decode(wires, interval=interval, intervals=intervals)
    flat = [r for rs in batches for r in rs]
    assert got.ids == [r.record_id for r in flat]
    assert got.streams == [r.stream for r in flat]
    assert got.keys == [r.key for r in flat]
    assert got.values == [r.value for r in flat]
    assert got.times == [r.event_time_ms for r in flat]
    assert got.producers == [r.producer for r in flat]
    assert [got.wire_record(i) for i in range(len(got))] == flat
    assert got.shape == _reference_shape(flat, interval, intervals)


@pytest.mark.parametrize(
    "wire",
    [b"\x2a\xff\xff", b"\x2a\x02\x32\x02\xff\xfe", b"\xff" * 11],
    ids=["truncated", "bad utf-8", "garbage"],
)
def test_bytes_that_are_not_a_batch_are_refused_with_a_message(wire: bytes) -> None:
    with pytest.raises(UndecodableRequestError, match="undecodable DeliveryBatch"):
        Received.decode([wire], interval=0, intervals=1)


@settings(max_examples=300, deadline=None)
@given(records, st.sampled_from([(0, 1), (0, 2), (1, 2), (2, 3)]))
def test_columns_given_whole_have_the_shape_their_wire_has(
    rs: list[record_pb2.Record], layout: tuple[int, int]
) -> None:
    interval, intervals = layout
    wire = delivery_pb2.DeliveryBatch(records=rs).SerializeToString()
    decoded = Received.decode([wire], interval=interval, intervals=intervals)
    given_whole = Received.of_columns(
        ids=decoded.ids, streams=decoded.streams, keys=decoded.keys, values=decoded.values,
        times=decoded.times, producers=decoded.producers, interval=interval, intervals=intervals,
    )  # fmt: skip
    assert given_whole == decoded


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        Received.of_columns(
            ids=[b"a", b"b"], streams=["s"], keys=[b"k", b"k"], values=[b"", b""], times=[1, 2],
            producers=["p", "p"], interval=0, intervals=1,
        )  # fmt: skip
