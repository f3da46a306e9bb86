"""Telling a receiver a retired sender's floor: a ``DeliveryBatch`` without records.

A split or a merge retires interval names as senders; the interval that took their
outbox tells every receiver, once nothing it inherited awaits an ack, that the name
will never send anything below its floor again (``engine/_retired_senders.py``), so
receivers release the dedup segments the name delivered into. It speaks as itself
(its own interval and epoch, which receivers check as for any batch) about the
interval it retired (``SendProgress.retired``).
"""

from __future__ import annotations

import grpc

from millrace.delivery._sender import DELIVER_METHOD, Origin
from millrace.wire.v1 import delivery_pb2, record_pb2


def tell_floor(
    channel: grpc.Channel,
    *,
    sender_id: str,
    origin: Origin,
    retired: int,
    consumer: str,
    interval: int,
    floor: int,
    timeout_s: float,
) -> bool:
    """Tell ``consumer``'s ``interval`` that ``origin``'s computation's interval
    ``retired`` (whose outbox ``origin`` took) sends nothing below ``floor`` again.
    True once the receiver committed it; False if it did not (not the owner, a stale
    epoch, unreachable): tell it again later."""
    batch = delivery_pb2.DeliveryBatch(
        batch_seq=1, target=record_pb2.KeyInterval(computation=consumer, index=interval)
    )
    sender = batch.sender
    sender.sender_id = sender_id
    sender.epoch = origin.epoch
    sender.interval.computation = origin.computation
    sender.interval.index = origin.interval
    sender.progress.sequence = origin.sequence
    sender.progress.floor = floor
    sender.progress.retired.computation = origin.computation
    sender.progress.retired.index = retired
    deliver = channel.stream_stream(
        DELIVER_METHOD,
        request_serializer=delivery_pb2.DeliveryBatch.SerializeToString,
        response_deserializer=delivery_pb2.DeliveryAck.FromString,
    )
    try:
        acks = deliver(iter([batch]), timeout=timeout_s)
        return any(ack.batch_seq == 1 and ack.progress_noted for ack in acks)
    except grpc.RpcError:
        return False
