"""gRPC face of the low-watermark authority (``WatermarkAuthority`` in ``watermark.proto``).

Translates protobuf to :class:`~injector.watermark_authority.IntervalReport` and
back; all watermark logic lives in :mod:`injector.watermark_authority`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent import futures

import grpc

from millrace.deployment import abort
from millrace.injector.watermark_authority import (
    IntervalReport,
    PublishedWatermark,
    WatermarkAuthority,
)
from millrace.wire.v1 import record_pb2, watermark_pb2, watermark_pb2_grpc

WATCH_POLL_SECONDS = 0.2
"""How often a watch stream checks that its client is still there while nothing changes."""


class WatermarkAuthorityServicer(watermark_pb2_grpc.WatermarkAuthorityServicer):
    """Serves one :class:`WatermarkAuthority`."""

    def __init__(
        self, authority: WatermarkAuthority, *, poll_seconds: float = WATCH_POLL_SECONDS
    ) -> None:
        self._authority = authority
        self._poll_seconds = poll_seconds

    def ReportWatermarks(
        self, request: watermark_pb2.ReportWatermarksRequest, context: grpc.ServicerContext
    ) -> watermark_pb2.ReportWatermarksResponse:
        """Fold the reports in; list the intervals whose reports were ignored.

        ``ignored_stale`` lists every report the reporter should stop sending:
        a stale epoch, or an interval the topology does not have (see
        :meth:`WatermarkAuthority.report`).
        """
        reports = [_from_proto(report) for report in request.reports]
        accepted, ignored = self._authority.report(reports)
        by_key = {(r.interval.computation, r.interval.index): r.interval for r in request.reports}
        return watermark_pb2.ReportWatermarksResponse(
            accepted=accepted,
            ignored_stale=[
                record_pb2.KeyInterval(
                    computation=name, index=index, count=by_key[name, index].count
                )
                for name, index in ignored
            ],
        )

    def WatchWatermarks(
        self, request: watermark_pb2.WatchWatermarksRequest, context: grpc.ServicerContext
    ) -> Iterator[watermark_pb2.WatermarkUpdates]:
        """Yield the snapshot of the watched names, then each change, until the client leaves.

        Empty ``request.computations`` watches every name, source streams
        included (``"source:<stream>"``); an unknown name is INVALID_ARGUMENT.
        """
        version, published = self._authority.snapshot()
        watched = list(dict.fromkeys(request.computations)) or sorted(published)
        unknown = sorted(set(watched) - set(published))
        if unknown:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"unknown watermark names {unknown}; known: {sorted(published)}",
            )
        yield _updates(published, watched)
        sent = {name: published[name].low_ms for name in watched}
        while context.is_active():
            new_version, published = self._authority.wait_for_updates(version, self._poll_seconds)
            if new_version == version:
                continue
            version = new_version
            changed = [name for name in watched if published[name].low_ms != sent[name]]
            if changed:
                yield _updates(published, changed)
                sent.update((name, published[name].low_ms) for name in changed)


def create_authority_server(
    authority: WatermarkAuthority, address: str = "127.0.0.1:0", *, max_workers: int = 32
) -> tuple[grpc.Server, int]:
    """Start a gRPC server for ``authority`` on ``address``; returns it and its bound port.

    Bind port 0 to get a free port. Every open watch holds one of the
    ``max_workers`` threads. Stop with ``server.stop(grace).wait()``.
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
    watermark_pb2_grpc.add_WatermarkAuthorityServicer_to_server(
        WatermarkAuthorityServicer(authority), server
    )
    port: int = server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"cannot bind the watermark authority to {address!r}")
    server.start()
    return server, port


def _from_proto(report: watermark_pb2.WatermarkReport) -> IntervalReport:
    return IntervalReport(
        computation=report.interval.computation,
        index=report.interval.index,
        epoch=report.epoch,
        oldest_work_ms=report.oldest_work_ms if report.HasField("oldest_work_ms") else None,
        # proto3 cannot tell an unset count from 0, and 0 is never valid: treat it as unset.
        count=report.interval.count or None,
        sequence=report.sequence,
    )


def _updates(
    published: Mapping[str, PublishedWatermark], names: list[str]
) -> watermark_pb2.WatermarkUpdates:
    return watermark_pb2.WatermarkUpdates(
        updates=[
            watermark_pb2.WatermarkUpdate(
                computation=name,
                low_watermark_ms=published[name].low_ms,
                computed_at_ms=published[name].computed_at_ms,
            )
            for name in names
        ]
    )
