"""A sender's progress headers never claim a floor past a record it may still resend.

Real gRPC over loopback to a receiver that acknowledges at random: some
records of a batch, all, or none (the sender resends those). Every batch's
``progress`` must say ``first``/``last`` of what it carries, and a ``floor``
at or below every position the sender has not yet seen acknowledged: the
receiver forgets a record id once the floor passes it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from millrace.delivery._sender import DownstreamSender, Origin
from millrace.engine._frames import Frame
from millrace.engine._production_ids import Production
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.delivery_helpers import CountingAcks


class _FlakyReceiver(delivery_pb2_grpc.DeliveryServicer):
    """Acks a random part of each batch; checks each header against what it acked."""

    def __init__(self, position_of: dict[bytes, int]) -> None:
        self.position_of = position_of
        self.acked: set[int] = set()
        self.violations: list[str] = []
        self.floors: list[int] = []
        self.rng = random.Random(7)
        self.lock = threading.Lock()

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            positions = [self.position_of[r.record_id] for r in batch.records]
            progress = batch.sender.progress
            with self.lock:
                if not batch.sender.HasField("progress"):
                    self.violations.append("a numbered batch without progress")
                if progress.first > min(positions) or progress.last < max(positions):
                    self.violations.append(f"{progress} does not span {positions}")
                unacked = [p for p in positions if p not in self.acked]
                if unacked and progress.floor > min(unacked):
                    self.violations.append(f"floor {progress.floor} passes {min(unacked)}")
                self.floors.append(progress.floor)
                keep = [r for r in batch.records if self.rng.random() < 0.6]
                self.acked.update(self.position_of[r.record_id] for r in keep)
            yield delivery_pb2.DeliveryAck(
                batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in keep]
            )


def test_floors_never_pass_an_unacknowledged_position() -> None:
    frames: list[Frame] = []
    position_of: dict[bytes, int] = {}
    for seq in range(41):  # one frame per commit, numbered by its sequence
        productions = []
        for i in range(5):
            rid = f"p{seq:03d}-{i}".encode()
            position_of[rid] = seq
            record = record_pb2.Record(record_id=rid, key=b"k", value=b"", stream="s")
            productions.append(Production.to("down", 0, record))
        frames.append(Frame("down", 0, productions, positions=(seq, seq)))
    receiver = _FlakyReceiver(position_of)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    delivery_pb2_grpc.add_DeliveryServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    acks = CountingAcks(total=200)
    sender = DownstreamSender(
        f"127.0.0.1:{port}", sender_id="up", callbacks=acks, max_batch=12, retry_s=0.01
    )
    sender.start()
    try:
        for start in range(0, 40, 8):  # frames 0..39
            sender.submit_frames(Origin("up", 0, 3), frames[start : start + 8])
        assert acks.done.wait(30), f"only {acks.count} of 200 acknowledged"
        # Everything below position 40 is acknowledged now: the next batch says so.
        acks.done.clear()
        acks.total = 205
        sender.submit_frames(Origin("up", 0, 3), frames[40:])
        assert acks.done.wait(30), f"only {acks.count} of 205 acknowledged"
    finally:
        sender.stop()
        server.stop(None)
    assert receiver.violations == []
    assert receiver.floors[-1] == 40, "the floor moved on as positions were acknowledged"
