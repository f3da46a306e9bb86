"""A node's link to the watermark authority: report oldest work, watch watermarks.

Reports are sent every ``interval_s`` and, synchronously, whenever an
interval's oldest work moved *earlier*. A worker does that before acking,
and its acks wait until the authority has accepted the report
(:meth:`WatermarkLink.wait_reported`): no sender can drop a hold that the
authority does not see here yet, even when a report fails or the authority
restarts. Reports carry a per-process sequence, so a delayed retry never
replaces a newer report. The watch feeds each worker the input watermark of
its computation: the minimum of the published low watermarks of what feeds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import grpc

from millrace.computations import IntervalId, Topology
from millrace.delivery import STREAM_DEADLINE_S
from millrace.deployment.security import Security
from millrace.engine import input_watermark
from millrace.statestore import wall_clock_ms
from millrace.wire.v1 import record_pb2, watermark_pb2, watermark_pb2_grpc

log = logging.getLogger(__name__)

_Report = tuple[str, int, int, int | None]  # computation, interval, epoch, oldest work


class WatermarkLink:
    """Reporting and watching for one node (no-op without an authority address)."""

    def __init__(
        self,
        address: str | None,
        *,
        node_id: str,
        topology: Topology,
        computation: str,
        on_watermark: Callable[[int], None],
        interval_s: float = 0.05,
        security: Security = Security(),
    ) -> None:
        self._address = address
        self._node_id = node_id
        self._topology = topology
        self._computation = computation
        self._on_watermark = on_watermark
        self._interval_s = interval_s
        self._latest: dict[IntervalId, _Report] = {}
        self._dirty = False
        self._lock = threading.Lock()
        self._delivered_cond = threading.Condition(self._lock)
        self._requested = 0
        """Bumped by every report; a send that succeeds delivers everything up to it."""
        self._delivered = 0
        self._sequence = 0
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._channel = security.open_channel(address) if address else None
        self._threads = [
            threading.Thread(target=self._report_loop, name="wm-report", daemon=True),
            threading.Thread(target=self._watch_loop, name="wm-watch", daemon=True),
        ]

    def start(self) -> None:
        """Start reporting and watching."""
        if self._channel is not None:
            for thread in self._threads:
                thread.start()

    def stop(self) -> None:
        """Stop both loops (and release every :meth:`wait_reported`)."""
        self._stopping.set()
        with self._lock:
            self._delivered_cond.notify_all()
        if self._channel is not None:
            self._channel.close()

    def report(
        self, computation: str, interval: int, epoch: int, oldest: int | None, urgent: bool
    ) -> int:
        """Record an interval's oldest work; ``urgent`` sends it before returning.

        Returns a ticket for :meth:`wait_reported`.
        """
        with self._lock:
            self._latest[IntervalId(computation, interval)] = (computation, interval, epoch, oldest)
            self._dirty = True
            self._requested += 1
            ticket = self._requested
        if urgent:
            self._send(timeout=2.0)
        return ticket

    def forget(self, computation: str, interval: int) -> None:
        """Stop reporting an interval this node no longer runs (the authority keeps its
        last report until the interval's new owner reports)."""
        with self._lock:
            self._latest.pop(IntervalId(computation, interval), None)

    def wait_reported(self, ticket: int, timeout: float) -> bool:
        """Block until the authority accepted a report including ``ticket`` (True), or
        ``timeout`` passes or the link stops (False). True at once without an authority."""
        if self._channel is None:
            return True
        with self._delivered_cond:
            return (
                self._delivered_cond.wait_for(
                    lambda: self._delivered >= ticket or self._stopping.is_set(), timeout
                )
                and self._delivered >= ticket
            )

    def _send(self, timeout: float) -> None:
        if self._channel is None:
            return
        with self._send_lock:
            with self._lock:
                if not self._dirty:
                    return
                reports = list(self._latest.values())
                self._dirty = False
                ticket = self._requested
                self._sequence += 1
                sequence = self._sequence
            protos = _to_protos(self._topology, reports, self._node_id, sequence)
            request = watermark_pb2.ReportWatermarksRequest(reports=list(protos))
            try:
                watermark_pb2_grpc.WatermarkAuthorityStub(self._channel).ReportWatermarks(
                    request, timeout=timeout
                )
            except grpc.RpcError as error:
                with self._lock:
                    self._dirty = True
                log.debug("watermark report to %s failed: %s", self._address, error)
                return
            with self._lock:
                self._delivered = max(self._delivered, ticket)
                self._delivered_cond.notify_all()

    def _report_loop(self) -> None:
        while not self._stopping.wait(self._interval_s):
            self._send(timeout=2.0)

    def _watch_loop(self) -> None:
        assert self._channel is not None
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(self._channel)
        published: dict[str, int] = {}
        while not self._stopping.is_set():
            try:
                watch = stub.WatchWatermarks(
                    watermark_pb2.WatchWatermarksRequest(), timeout=STREAM_DEADLINE_S
                )
                for updates in watch:
                    for update in updates.updates:
                        published[update.computation] = update.low_watermark_ms
                    mark = input_watermark(self._topology, self._computation, published)
                    if mark is not None:
                        self._on_watermark(mark)
            except grpc.RpcError as error:
                if not self._stopping.is_set():
                    log.debug("watermark watch on %s broke: %s", self._address, error)
            time.sleep(0.1)


def _to_protos(
    topology: Topology, reports: Iterable[_Report], node_id: str, sequence: int
) -> Iterable[watermark_pb2.WatermarkReport]:
    now = wall_clock_ms()
    for computation, interval, epoch, oldest in reports:
        count = topology.computations[computation].intervals
        report = watermark_pb2.WatermarkReport(
            interval=record_pb2.KeyInterval(computation=computation, index=interval, count=count),
            epoch=epoch,
            reported_at_ms=now,
            node_id=node_id,
            sequence=sequence,
        )
        if oldest is not None:
            report.oldest_work_ms = oldest
        yield report
