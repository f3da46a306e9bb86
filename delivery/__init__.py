"""The delivery protocol: frames sent from an outbox, acked after the receiver's commit.

A :class:`DownstreamSender` streams one destination interval's frames as
``DeliveryBatch`` messages and retires them on ``DeliveryAck``; a
:class:`SenderPool` keeps one per destination and :class:`Routes` says where
each interval lives. :class:`DeliveryService` is the receiving side: it hands
each batch to the hosted interval's target and streams acks back. Shared by
the nodes and the injector's forwarder.
"""

from millrace.delivery._acks import Ack, DeliveryWork
from millrace.delivery._floor_notice import tell_floor
from millrace.delivery._receiver import SERVICE, BatchTarget, DeliveryService
from millrace.delivery._routes import Routes
from millrace.delivery._sender import (
    CHANNEL_OPTIONS,
    STREAM_DEADLINE_S,
    DownstreamSender,
    Origin,
)
from millrace.delivery._sender_pool import SenderPool

__all__ = [
    "CHANNEL_OPTIONS",
    "SERVICE",
    "STREAM_DEADLINE_S",
    "Ack",
    "BatchTarget",
    "DeliveryService",
    "DeliveryWork",
    "DownstreamSender",
    "Origin",
    "Routes",
    "SenderPool",
    "tell_floor",
]
