"""The receiving side of ``Delivery``: batches in, acks out, after the commit.

Each incoming stream gets a reader thread that hands batches to the target
interval's :class:`BatchTarget` (a node's interval worker); acks flow back on
the response stream in completion order. An undecodable message ends that
stream with INVALID_ARGUMENT and a message saying what could not be parsed;
the channel and other streams are unaffected, and the sender resends its
unacknowledged batches on a new stream.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import grpc
from google.protobuf.message import DecodeError

from millrace.computations import IntervalId
from millrace.delivery._acks import DeliveryWork
from millrace.deployment import abort
from millrace.wire.v1 import delivery_pb2

SERVICE = "millrace.wire.v1.Delivery"


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request that did not parse as a ``DeliveryBatch``."""

    size: int
    error: str


def parse_batch(data: bytes) -> tuple[delivery_pb2.DeliveryBatch, bytes] | Undecodable:
    """Deserializer that turns a parse failure into a value the handler can answer; a
    batch comes with its bytes, from which the worker reads its records natively."""
    batch = delivery_pb2.DeliveryBatch()
    try:
        batch.ParseFromString(data)
    except DecodeError as exc:
        return Undecodable(len(data), str(exc))
    return batch, data


_END = object()


class BatchTarget(Protocol):
    """Where the batches of one hosted interval go: it answers each through
    ``work.reply``, after its commit."""

    def deliver(self, work: DeliveryWork) -> None:
        """Take ``work`` (never blocks for long; the reply comes later)."""


class DeliveryService:
    """Routes delivery batches to the workers of the intervals this node hosts."""

    def __init__(self, workers: Mapping[IntervalId, BatchTarget]) -> None:
        self._workers = workers

    def handler(self) -> grpc.GenericRpcHandler:
        """The service with the tolerant deserializer, for ``server.add_generic_rpc_handlers``."""
        method = grpc.stream_stream_rpc_method_handler(
            self.deliver,
            request_deserializer=parse_batch,
            response_serializer=delivery_pb2.DeliveryAck.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE, {"Deliver": method})

    def deliver(
        self,
        requests: Iterator[tuple[delivery_pb2.DeliveryBatch, bytes] | Undecodable],
        context: grpc.ServicerContext,
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        """One bidirectional stream: a reader thread dispatches, this generator answers."""
        replies: queue.SimpleQueue[object] = queue.SimpleQueue()
        submitted = [0]
        reader = threading.Thread(
            target=self._read, args=(requests, replies, submitted), daemon=True
        )
        reader.start()
        answered = 0
        ended = False
        while context.is_active():
            try:
                item = replies.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is _END:
                ended = True
            elif isinstance(item, Undecodable):
                abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"undecodable DeliveryBatch ({item.size} bytes): {item.error}",
                )
            else:
                assert isinstance(item, delivery_pb2.DeliveryAck)
                answered += 1
                yield item
            if ended and answered >= submitted[0]:
                return

    def _read(
        self,
        requests: Iterator[tuple[delivery_pb2.DeliveryBatch, bytes] | Undecodable],
        replies: queue.SimpleQueue[object],
        submitted: list[int],
    ) -> None:
        reply: Callable[[delivery_pb2.DeliveryAck], None] = replies.put
        try:
            for request in requests:
                if isinstance(request, Undecodable):
                    replies.put(request)
                    return
                batch, wire = request
                submitted[0] += 1
                worker = self._workers.get(IntervalId(batch.target.computation, batch.target.index))
                if worker is None:
                    reply(_not_hosted(batch))
                else:
                    worker.deliver(DeliveryWork(batch, reply, wire))
        except grpc.RpcError:
            pass  # the stream was cancelled; the sender will resend
        finally:
            replies.put(_END)


def _not_hosted(batch: delivery_pb2.DeliveryBatch) -> delivery_pb2.DeliveryAck:
    ack = delivery_pb2.DeliveryAck(batch_seq=batch.batch_seq)
    message = f"this node does not host {batch.target.computation}/{batch.target.index}"
    for record in batch.records:
        ack.rejected.add(record_id=record.record_id, reason=delivery_pb2.NOT_OWNER, message=message)
    return ack
