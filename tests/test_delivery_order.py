"""Productions reach a consumer in the order they were made, across restarts and broken streams.

A sink's materialized view keeps the latest value per key, so a production
resent after a crash must not overtake a newer one: the outbox resends in
production order, and a sender puts unacknowledged batches back in the order
it first sent them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from millrace.delivery._sender import DownstreamSender, Origin
from millrace.engine._production_ids import Production
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.delivery_helpers import CountingAcks, forwarding_processor
from tests.support import numbered_records


def test_outbox_resends_in_production_order_after_a_restart(tmp_path: Path) -> None:
    processor = forwarding_processor(tmp_path / "s", epoch=1)
    made: list[bytes] = []
    for start in range(0, 600, 100):  # six commits, nothing acknowledged
        outcome = processor.process_records(numbered_records(start, 100, keys=7))
        made += [p.record.record_id for p in outcome.productions]
    # Production ids are hashes: key order in the outbox is not production order.
    assert sorted(made) != made
    processor.store.close()

    restarted = forwarding_processor(tmp_path / "s", epoch=2)
    assert [p.record.record_id for p in restarted.pending_productions()] == made
    more = restarted.process_records(numbered_records(600, 50, keys=7)).productions
    restarted.store.close()
    again = forwarding_processor(tmp_path / "s", epoch=3)
    expected = made + [p.record.record_id for p in more]
    assert [p.record.record_id for p in again.pending_productions()] == expected
    again.store.close()


class _BreakingReceiver(delivery_pb2_grpc.DeliveryServicer):
    """Acks each batch it reads, except that every ``every``-th stream read ends the
    stream with UNAVAILABLE before reading that batch: whatever the sender had in flight
    behind it must come back, in order."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.arrivals: list[bytes] = []  # first arrival of each record id, in order
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        self._reads = 0

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            with self._lock:
                self._reads += 1
                if self._reads % self.every == 0:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "breaking the stream on purpose")
                for record in batch.records:
                    if record.record_id not in self._seen:
                        self._seen.add(record.record_id)
                        self.arrivals.append(record.record_id)
            yield delivery_pb2.DeliveryAck(
                batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in batch.records]
            )


def test_sender_resends_unacknowledged_batches_in_their_first_order() -> None:
    receiver = _BreakingReceiver(every=5)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    delivery_pb2_grpc.add_DeliveryServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    acks = CountingAcks()
    productions = [
        Production.to("sink:ok", 0, record_pb2.Record(record_id=f"p{i:06d}".encode(), key=b"k"))
        for i in range(3000)
    ]
    acks.total = len(productions)
    sender = DownstreamSender(
        f"127.0.0.1:{port}", sender_id="t", callbacks=acks, max_batch=20, max_inflight=8
    )
    sender.start()
    try:
        origin = Origin("fwd", 0, 1)
        for start in range(0, len(productions), 100):
            sender.submit(origin, productions[start : start + 100])
        assert acks.done.wait(60), f"only {acks.count} of {acks.total} acknowledged"
    finally:
        sender.stop()
        server.stop(None)
    assert receiver.arrivals == [p.record.record_id for p in productions]
    assert sender.retried > 0, "the receiver broke streams with batches in flight"
