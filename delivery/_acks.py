"""A delivery as the receiving side holds it: the batch and where its ack goes.

The ack itself (committed / duplicates / rejected per record) is built by the
engine's :class:`~engine.IntervalDriver` after the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from millrace.wire.v1 import delivery_pb2

Ack = delivery_pb2.DeliveryAck


@dataclass(frozen=True, slots=True)
class DeliveryWork:
    """A batch from a sender and where to send its ack."""

    batch: delivery_pb2.DeliveryBatch
    reply: Callable[[Ack], None]
    wire: bytes | None = None
    """The batch as it arrived (its records are read natively from these bytes);
    None: only the parsed message is at hand."""
