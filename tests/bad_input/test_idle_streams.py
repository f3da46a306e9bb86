"""Idle and abandoned streams cannot starve a service (issue 15, defect 2).

A peer opens Deliver streams to a node, some idle, some sending a batch and never
reading its acks, far more than the node admits: the ones over the bound end at
once with RESOURCE_EXHAUSTED and a message, the node's health check and Admin
keep answering within a second, and legitimate records flow to the sink. The
same against the injector's IngestStream and the watch streams.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from millrace.wire.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    delivery_pb2,
    delivery_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    record_pb2,
    watermark_pb2,
    watermark_pb2_grpc,
)
from tests.bad_input.pipeline import pipeline

pytestmark = pytest.mark.slow

CHANNELS = 6
STREAMS_PER_CHANNEL = 14  # 84 streams: over every service's bound, and over 16 per peer


def answers_quickly(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        started = time.monotonic()
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        assert time.monotonic() - started < 2.0, "health answered, but slowly"


def test_a_flood_of_idle_streams_is_shed_and_the_services_keep_answering(tmp_path: Path) -> None:
    release = threading.Event()

    def idle() -> Iterator[delivery_pb2.DeliveryBatch]:
        release.wait(120)
        return
        yield

    def one_batch_then_idle() -> Iterator[delivery_pb2.DeliveryBatch]:
        batch = delivery_pb2.DeliveryBatch(batch_seq=1)
        batch.target.computation = "down"
        batch.records.append(record_pb2.Record(record_id=b"x", key=b"k", stream="nope"))
        yield batch
        release.wait(120)

    def idle_ingest() -> Iterator[ingest_pb2.IngestRequest]:
        release.wait(120)
        return
        yield

    with pipeline(tmp_path) as p:
        # A subchannel pool per channel: one connection (one peer) per channel.
        own = [("grpc.use_local_subchannel_pool", 1)]
        channels = [grpc.insecure_channel(p.address("down"), options=own) for _ in range(CHANNELS)]
        channels += [
            grpc.insecure_channel(p.address("injector"), options=own) for _ in range(CHANNELS)
        ]
        calls = []
        try:
            for number, channel in enumerate(channels[:CHANNELS]):
                stub = delivery_pb2_grpc.DeliveryStub(channel)
                for s in range(STREAMS_PER_CHANNEL):
                    source = idle() if (number + s) % 2 else one_batch_then_idle()
                    calls.append(stub.Deliver(source, timeout=120))  # acks never read
            for channel in channels[CHANNELS:]:
                ingest = ingest_pb2_grpc.IngestStub(channel)
                watch = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
                for s in range(STREAMS_PER_CHANNEL):
                    if s % 2:
                        calls.append(ingest.IngestStream(idle_ingest(), timeout=120))
                    else:
                        calls.append(
                            watch.WatchWatermarks(
                                watermark_pb2.WatchWatermarksRequest(), timeout=120
                            )
                        )
            time.sleep(2.0)
            shed = [c for c in calls if c.done() and c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
            assert len(shed) >= len(calls) - 48 - 64, "what is over the bounds is refused"
            assert shed, "the flood went over the bounds"
            assert all("streaming calls" in (c.details() or "") for c in shed)
            for name in ("down", "up", "injector"):
                answers_quickly(p.address(name))
            with grpc.insecure_channel(p.address("down")) as channel:
                admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=2)
            p.ingest(30)
            p.legit_records_arrive()
        finally:
            release.set()
            for call in calls:
                call.cancel()
            for channel in channels:
                channel.close()
