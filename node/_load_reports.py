"""``LoadReporter``: the node's heartbeat to the injector, with its intervals' work.

About once a second it sends ``Control.ReportLoad``: the node's id and computation
and, per interval it runs, the records committed and the CPU seconds its worker
thread used since the interval opened here. The injector counts a node that reports
as live (a node with no interval too: it can take work) and turns the counters into
the rates its rebalancer and ``millrace status`` read. A report that fails is dropped; the next
one carries the counters on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

import grpc

from millrace.node._worker import IntervalWorker
from millrace.wire.v1 import control_pb2, control_pb2_grpc

log = logging.getLogger(__name__)

REPORT_EVERY_S = 1.0


class LoadReporter:
    """Reports the intervals of ``running()`` every :data:`REPORT_EVERY_S` from its own
    thread."""

    def __init__(
        self,
        channel: grpc.Channel,
        *,
        node_id: str,
        computation: str,
        running: Callable[[], Iterable[IntervalWorker]],
    ) -> None:
        self._stub = control_pb2_grpc.ControlStub(channel)
        self._node_id = node_id
        self._computation = computation
        self._running = running
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-reports", daemon=True)

    def _sample(self) -> list[control_pb2.IntervalLoad]:
        return [
            control_pb2.IntervalLoad(
                index=worker.processor.interval,
                epoch=worker.processor.epoch,
                records_committed=worker.processor.records_committed,
                cpu_seconds=worker.cpu_seconds,
            )
            for worker in list(self._running())
        ]

    def start(self) -> None:
        """Report now and every second."""
        self._thread.start()

    def stop(self) -> None:
        """Report no more."""
        self._stopping.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            request = control_pb2.ReportLoadRequest(
                node_id=self._node_id, computation=self._computation, intervals=self._sample()
            )
            try:
                self._stub.ReportLoad(request, timeout=2.0)
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    log.warning("the injector refused this node's load report: %s", error.details())
                else:
                    log.debug("load report failed: %s", error.code())
            self._stopping.wait(REPORT_EVERY_S)
