"""Forged epochs (issue 15, defect 1): epochs come from the registry, not from messages.

Before, a node fenced itself for good on a batch naming a higher ``target_epoch``
(and persisted it: ``2**63 - 1`` kept it down across restarts), and a downstream
node adopted a sender epoch nobody granted, refusing every genuine record of
that sender ever after. Now both batches are refused with a reason and nothing
is adopted; legitimate records ingested afterwards reach the sink exactly once,
also across restarts of both nodes.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2
from tests.bad_input.pipeline import pipeline

pytestmark = pytest.mark.slow


def deliver(address: str, batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
    with grpc.insecure_channel(address) as channel:
        acks = list(delivery_pb2_grpc.DeliveryStub(channel).Deliver(iter([batch]), timeout=20))
    ack: delivery_pb2.DeliveryAck = acks[0]
    return ack


def forged(
    target: str, *, target_epoch: int = 0, sender: tuple[str, int, int] | None = None
) -> delivery_pb2.DeliveryBatch:
    """One record for ``target``/0, as an attacker would send it."""
    stream = "in" if target == "up" else "mid"
    record = record_pb2.Record(
        record_id=b"forged-%d" % target_epoch, key=b"k0", value=b"forged", stream=stream
    )
    batch = delivery_pb2.DeliveryBatch(batch_seq=1, target_epoch=target_epoch, records=[record])
    batch.target.computation = target
    batch.target.index = 0
    batch.sender.sender_id = "attacker"
    if sender is not None:
        batch.sender.interval.computation, batch.sender.interval.index, batch.sender.epoch = sender
    return batch


def test_forged_epochs_are_refused_and_never_adopted(tmp_path: Path) -> None:
    with pipeline(tmp_path) as p:
        p.ingest(10)
        p.legit_records_arrive()
        for epoch in (100, 2**63 - 1):  # a newer owner of up/0, says the message
            ack = deliver(p.address("up"), forged("up", target_epoch=epoch))
            [rejection] = ack.rejected
            assert rejection.reason == delivery_pb2.NOT_OWNER
            assert f"the batch is for epoch {epoch}" in rejection.message
        for epoch in (10**9, 2**63 - 1):  # up/0 sends at an epoch nobody granted
            ack = deliver(p.address("down"), forged("down", sender=("up", 0, epoch)))
            [rejection] = ack.rejected
            assert rejection.reason == delivery_pb2.UNKNOWN_SENDER_EPOCH
            assert "never granted by the ownership registry" in rejection.message
        p.ingest(30)
        p.legit_records_arrive()
        assert b"forged" not in p.sink.values()
        for node in p.nodes.values():  # and across restarts of both nodes
            node.kill()
            node.start()
        p.ingest(10)
        p.legit_records_arrive()
        assert "fenced" not in p.nodes["up"].log_path.read_text()
