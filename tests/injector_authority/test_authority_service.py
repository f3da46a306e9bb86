"""The watermark authority over real gRPC on loopback: reports, watches, cancellation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from millrace.computations import MIN_TIME
from millrace.injector.authority_service import WatermarkAuthorityServicer, create_authority_server
from millrace.injector.watermark_authority import IntervalReport, WatermarkAuthority
from millrace.wire.v1 import record_pb2, watermark_pb2, watermark_pb2_grpc
from tests.workloads import two_stage_topology

WAIT = 10.0
"""Generous bound on anything that should happen promptly; never a timing assertion."""


@pytest.fixture
def authority() -> WatermarkAuthority:
    return WatermarkAuthority(two_stage_topology(), clock=lambda: 42)


@pytest.fixture
def stub(authority: WatermarkAuthority) -> Iterator[watermark_pb2_grpc.WatermarkAuthorityStub]:
    server, port = create_authority_server(authority)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield watermark_pb2_grpc.WatermarkAuthorityStub(channel)
    finally:
        channel.close()
        assert server.stop(0.5).wait(WAIT)


def report(
    computation: str, index: int, work: int | None, *, epoch: int = 1, count: int = 2
) -> watermark_pb2.WatermarkReport:
    message = watermark_pb2.WatermarkReport(
        interval=record_pb2.KeyInterval(computation=computation, index=index, count=count),
        epoch=epoch,
        reported_at_ms=1,
        node_id="node-a",
    )
    if work is not None:
        message.oldest_work_ms = work
    return message


def values(message: watermark_pb2.WatermarkUpdates) -> dict[str, int]:
    return {u.computation: u.low_watermark_ms for u in message.updates}


def test_report_folds_in_and_lists_stale_intervals(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub, authority: WatermarkAuthority
) -> None:
    authority.set_source_watermark("events", 1_000)
    response = stub.ReportWatermarks(
        watermark_pb2.ReportWatermarksRequest(
            reports=[
                report("counts", 0, 600, epoch=3),
                report("counts", 1, None, epoch=3),  # absent oldest_work_ms: no work
                report("counts", 0, 100, epoch=2),  # fenced-off owner
            ]
        ),
        timeout=WAIT,
    )
    assert response.accepted == 2
    assert list(response.ignored_stale) == [
        record_pb2.KeyInterval(computation="counts", index=0, count=2)
    ]
    assert authority.watermarks()["counts"] == 600


def test_report_with_another_interval_count_is_ignored(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub,
) -> None:
    request = watermark_pb2.ReportWatermarksRequest(reports=[report("totals", 3, None, count=4)])
    response = stub.ReportWatermarks(request, timeout=WAIT)
    assert response.accepted == 0
    assert [(i.computation, i.index, i.count) for i in response.ignored_stale] == [("totals", 3, 4)]


def test_report_without_an_interval_count_is_not_checked_against_it(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub, authority: WatermarkAuthority
) -> None:
    request = watermark_pb2.ReportWatermarksRequest(reports=[report("counts", 0, 7, count=0)])
    response = stub.ReportWatermarks(request, timeout=WAIT)
    assert (response.accepted, list(response.ignored_stale)) == (1, [])
    assert authority.oldest_work()["counts"] == MIN_TIME  # interval 1 has not reported yet


def test_watch_sends_the_snapshot_then_changes_only(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub, authority: WatermarkAuthority
) -> None:
    watch = stub.WatchWatermarks(watermark_pb2.WatchWatermarksRequest(), timeout=WAIT)
    try:
        snapshot = next(watch)
        assert values(snapshot) == {
            "counts": MIN_TIME,
            "totals": MIN_TIME,
            "source:events": MIN_TIME,
        }
        assert {u.computed_at_ms for u in snapshot.updates} == {42}

        authority.set_source_watermark("events", 1_000)
        assert values(next(watch)) == {"source:events": 1_000}

        stub.ReportWatermarks(
            watermark_pb2.ReportWatermarksRequest(
                reports=[report(c, i, None) for c in ("counts", "totals") for i in range(2)]
            ),
            timeout=WAIT,
        )
        assert values(next(watch)) == {"counts": 1_000, "totals": 1_000}
    finally:
        watch.cancel()


def test_a_filtered_watch_gets_only_its_computation(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub, authority: WatermarkAuthority
) -> None:
    request = watermark_pb2.WatchWatermarksRequest(computations=["totals"])
    watch = stub.WatchWatermarks(request, timeout=WAIT)
    try:
        assert values(next(watch)) == {"totals": MIN_TIME}
        authority.set_source_watermark("events", 1_000)  # changes source:events only
        authority.report(
            [IntervalReport("counts", i, 1, 500) for i in range(2)]
            + [IntervalReport("totals", i, 1, None) for i in range(2)]
        )
        assert values(next(watch)) == {"totals": 500}
    finally:
        watch.cancel()


def test_watching_an_unknown_name_is_invalid(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub,
) -> None:
    request = watermark_pb2.WatchWatermarksRequest(computations=["nope"])
    with pytest.raises(grpc.RpcError) as raised:
        next(stub.WatchWatermarks(request, timeout=WAIT))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nope" in raised.value.details()


class _ObservedServicer(WatermarkAuthorityServicer):
    """Records when a server-side watch stream has ended."""

    def __init__(self, authority: WatermarkAuthority) -> None:
        super().__init__(authority)
        self.ended = threading.Event()

    def WatchWatermarks(
        self, request: watermark_pb2.WatchWatermarksRequest, context: grpc.ServicerContext
    ) -> Iterator[watermark_pb2.WatermarkUpdates]:
        try:
            yield from super().WatchWatermarks(request, context)
        finally:
            self.ended.set()


def test_cancelling_a_watch_ends_the_server_side_stream(authority: WatermarkAuthority) -> None:
    servicer = _ObservedServicer(authority)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    watermark_pb2_grpc.add_WatermarkAuthorityServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
        watch = stub.WatchWatermarks(watermark_pb2.WatchWatermarksRequest())
        next(watch)
        assert not servicer.ended.is_set()

        watch.cancel()

        assert servicer.ended.wait(WAIT)
    finally:
        channel.close()
        assert server.stop(0.5).wait(WAIT)


def test_the_server_stops_cleanly_with_a_watch_open(authority: WatermarkAuthority) -> None:
    server, port = create_authority_server(authority)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
        watch = stub.WatchWatermarks(watermark_pb2.WatchWatermarksRequest())
        next(watch)
        assert server.stop(0.5).wait(WAIT)
        with pytest.raises(grpc.RpcError) as raised:
            next(watch)
        assert raised.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    finally:
        channel.close()
