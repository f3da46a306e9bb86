"""Small pieces every Millrace service shares: health/reflection, aborts, signals."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)
"""A server option every Millrace server sets. gRPC's default lets any number of processes
bind one port (SO_REUSEPORT) and the kernel splits connections between them: a
replacement started beside a paused node would silently take half its deliveries."""


def metrics_host(service_address: str) -> str:
    """Where a service's Prometheus endpoint listens: the host its gRPC address names
    (``127.0.0.1`` stays on loopback), every interface only when the service itself
    listens on every interface."""
    host = service_address.rpartition(":")[0].strip("[]")
    return host if host and host != "::" else "0.0.0.0"


def serve_health_and_reflection(server: grpc.Server, services: Iterable[str]) -> None:
    """Standard gRPC health (every service SERVING) and server reflection on ``server``."""
    names = tuple(services)
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for service in ("", *names):
        servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        (*names, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )


MAX_STATUS_MESSAGE = 1000
"""Characters of a status message: it travels in trailing metadata, whose size is limited
(and an oversized one would turn a clear status into RESOURCE_EXHAUSTED)."""


def brief(text: str, limit: int = 80) -> str:
    """``text`` quoted, cut to ``limit`` characters: names from requests go into messages,
    and a megabyte-long one must not make the message itself fail."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    """End the call with ``code`` and ``message`` (cut to :data:`MAX_STATUS_MESSAGE`
    characters; ``context.abort`` raises)."""
    if len(message) > MAX_STATUS_MESSAGE:
        message = message[: MAX_STATUS_MESSAGE - 3] + "..."
    context.abort(code, message)
    raise AssertionError("unreachable: grpc's abort raises")


def enable_stack_dumps() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr (for a stuck process)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)


SUPERVISOR_PID_ENV = "MILLRACE_SUPERVISOR_PID"
"""Set by ``millrace up`` for the services it starts: its pid. A service whose parent is
no longer that process (the supervisor was SIGKILLed) drains and stops, as on SIGTERM,
instead of running on unsupervised (and holding its ports and stores)."""


class StopSignals:
    """SIGTERM/SIGINT handlers, installed when constructed: before a service prints its
    ready line, so that a stop request right after it is a graceful drain, not a kill.
    Under ``millrace up``, the supervisor's end is a stop request too."""

    def __init__(self) -> None:
        self._received: list[int] = []
        self._stopping = threading.Event()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        supervisor = os.environ.get(SUPERVISOR_PID_ENV, "")
        self._supervisor = int(supervisor) if supervisor.isdigit() else None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._received.append(signum)
        self._stopping.set()

    def wait(self, until: threading.Event | None = None) -> None:
        """Block until SIGTERM or SIGINT, then log which one (the drain starts); or
        until ``until`` is set (the service decided to stop by itself)."""
        # Never an unbounded wait: the kernel may deliver the signal to any thread, and
        # Python runs handlers only when the main thread wakes; a plain ``wait()`` could
        # sleep forever.
        while not self._stopping.wait(0.2):
            if until is not None and until.is_set():
                return
            if self._supervisor is not None and os.getppid() != self._supervisor:
                logging.getLogger("millrace").warning(
                    "the supervisor (pid %d) is gone: draining",
                    self._supervisor,
                    extra={"event": "stopping", "reason": "supervisor_gone"},
                )
                return
        logging.getLogger("millrace").info(
            "%s received: draining",
            signal.Signals(self._received[0]).name,
            extra={"event": "stopping"},
        )
