"""``wait_quiescent``: wait until a pipeline of nodes has nothing left to emit.

Checks that pass after a fixed sleep ("a duplicate would show up now") pass
whenever the machine is slow. Instead: every interval of every node has an
empty outbox (everything it sent is acknowledged downstream) and no pending
timer (with the watermark past the end, nothing more will fire), twice in a
row; then nothing more can arrive anywhere, and the check that follows is
final.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import grpc

from millrace.wire.v1 import admin_pb2, admin_pb2_grpc


def _idle(address: str, *, timers: bool) -> bool:
    try:
        with grpc.insecure_channel(address) as channel:
            status = admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=5)
    except grpc.RpcError:
        return False  # restarting: not known to be idle
    return all(
        interval.outbox_size == 0 and (not timers or interval.pending_timers == 0)
        for interval in status.intervals
    )


def wait_quiescent(addresses: Iterable[str], timeout: float, *, timers: bool = True) -> None:
    """Block until every node at ``addresses`` is idle (empty outboxes; with ``timers``,
    no pending timer) at two polls in a row; fail after ``timeout`` seconds."""
    nodes = list(addresses)
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < 2:
        if time.monotonic() > deadline:
            raise AssertionError(f"the nodes at {nodes} did not go quiet in {timeout:g} s")
        quiet = quiet + 1 if all(_idle(a, timers=timers) for a in nodes) else 0
        time.sleep(0.1)
