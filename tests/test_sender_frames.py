"""A sender sends frames as they are: a header, then each frame's stored encoding.

Real gRPC over loopback to a receiver that records every batch it parses.
Frames encoded by the outbox, frames not encoded yet, several frames in one
batch and a frame bigger than a batch all have to arrive as well-formed
``DeliveryBatch`` es: right target and sender, every record once, in order;
frames of big records are not combined past gRPC's message limit.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from millrace.delivery import CHANNEL_OPTIONS
from millrace.delivery._sender import DownstreamSender, Origin
from millrace.engine import FRAME_BYTES
from millrace.engine._frames import Frame, encode_frame
from millrace.engine._production_ids import Production
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.delivery_helpers import CountingAcks


class _RecordingReceiver(delivery_pb2_grpc.DeliveryServicer):
    def __init__(self) -> None:
        self.batches: list[delivery_pb2.DeliveryBatch] = []
        self.lock = threading.Lock()

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            with self.lock:
                self.batches.append(batch)
            yield delivery_pb2.DeliveryAck(
                batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in batch.records]
            )


def _frame(consumer: str, start: int, count: int, *, encoded: bool, value_bytes: int = 0) -> Frame:
    productions = [
        Production.to(
            consumer,
            3,
            record_pb2.Record(
                record_id=f"{consumer}-{i:05d}".encode(),
                key=b"k%d" % i,
                value=b"v" * (value_bytes or i % 7),
                event_time_ms=i,
                producer="up",
                stream="s",
            ),
        )
        for i in range(start, start + count)
    ]
    frame = Frame(consumer, 3, productions)
    if encoded:
        frame.payload = encode_frame(consumer, 3, productions)
    return frame


def _delivered(frames: list[Frame], **sender_options: Any) -> list[delivery_pb2.DeliveryBatch]:
    """The batches a receiver (real gRPC, with the nodes' message limits) parsed once a
    sender delivered ``frames`` (from origin ``up``/2 at epoch 7) and had them all acked."""
    receiver = _RecordingReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=CHANNEL_OPTIONS)
    delivery_pb2_grpc.add_DeliveryServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    acks = CountingAcks(total=sum(len(frame) for frame in frames))
    sender = DownstreamSender(f"127.0.0.1:{port}", sender_id="t", callbacks=acks, **sender_options)
    sender.submit_frames(Origin("up", 2, 7), frames)
    sender.start()
    try:
        assert acks.done.wait(60), f"only {acks.count} of {acks.total} acknowledged"
    finally:
        sender.stop()
        server.stop(None)
    return receiver.batches


def test_frames_arrive_as_well_formed_batches_in_order() -> None:
    sizes = [10, 25, 7, 120, 30, 1, 49, 50, 13]
    frames: list[Frame] = []
    start = 0
    for n, size in enumerate(sizes):
        for consumer in ("a", "b"):
            frames.append(_frame(consumer, start, size, encoded=n % 2 == 0))
        start += size
    batches = _delivered(frames, max_batch=50)

    arrived: dict[str, list[bytes]] = {"a": [], "b": []}
    for batch in batches:
        consumer = batch.target.computation
        assert batch.target.index == 3 and batch.batch_seq > 0
        assert (batch.sender.sender_id, batch.sender.epoch) == ("t", 7)
        assert (batch.sender.interval.computation, batch.sender.interval.index) == ("up", 2)
        assert len(batch.records) <= 50 or len(batch.records) == 120, "only a big frame goes alone"
        assert all(r.record_id.startswith(consumer.encode()) for r in batch.records)
        arrived[consumer] += [r.record_id for r in batch.records]
    for consumer in ("a", "b"):
        expected = [
            p.record.record_id for f in frames if f.consumer == consumer for p in f.productions
        ]
        assert arrived[consumer] == expected
    assert any(len(b.records) > max(sizes[:3]) and len(b.records) <= 50 for b in batches), (
        "frames were combined into batches"
    )
    sample = batches[0].records[1]
    assert (sample.value, sample.event_time_ms, sample.producer, sample.stream) == (
        b"v", 1, "up", "s",
    )  # fmt: skip


def test_frames_of_big_records_are_not_combined_past_the_message_limit() -> None:
    """Twelve frames of two 3 MiB records each, queued at once: combined by record count
    alone they would make one 72 MiB message, which gRPC refuses (the sender would
    resend it forever); each batch stays within ``FRAME_BYTES`` and everything arrives."""
    frames = [_frame("a", 2 * n, 2, encoded=True, value_bytes=3 << 20) for n in range(12)]
    batches = _delivered(frames)
    assert [r.record_id for b in batches for r in b.records] == [
        p.record.record_id for f in frames for p in f.productions
    ]
    assert all(b.ByteSize() <= FRAME_BYTES + 1024 for b in batches)
    assert max(len(b.records) for b in batches) == 2, "whole frames, one a batch"
