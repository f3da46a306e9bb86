"""Shared pieces of the delivery tests: a one-stage forwarding processor over real
RocksDB, and sender callbacks that count acknowledgements."""

from __future__ import annotations

import threading
from pathlib import Path

from millrace.computations import Topology
from millrace.delivery._sender import Origin
from millrace.engine import IntervalProcessor
from millrace.engine._production_ids import Production
from millrace.statestore import StateStore

FORWARD_TOPOLOGY = {
    "streams": {"in": {}, "ok": {}},
    "computations": {
        "fwd": {"handler": "tests.workloads:Poison", "inputs": {"in": "key"}, "outputs": ["ok"]}
    },
}
"""``fwd`` reads ``in`` and forwards each record to the sink stream ``ok``."""


def forwarding_processor(path: Path, epoch: int) -> IntervalProcessor:
    """Interval 0 of ``fwd`` over a RocksDB store at ``path`` (opened, or reopened)."""
    store = StateStore.open_rocksdb(path)
    return IntervalProcessor(
        topology=Topology.from_dict(FORWARD_TOPOLOGY), computation="fwd", interval=0,
        store=store, epoch=epoch,
    )  # fmt: skip


class CountingAcks:
    """Sender callbacks: counts acked productions, sets ``done`` at ``total``; a fence
    or a refusal fails the test."""

    def __init__(self, total: int = 0) -> None:
        self.total = total
        self.count = 0
        self.done = threading.Event()

    def acked(self, origin: Origin, outbox_keys: list[bytes]) -> None:
        self.count += len(outbox_keys)
        if self.count >= self.total:
            self.done.set()

    def fenced(self, origin: Origin, message: str) -> None:
        raise AssertionError(message)

    def refused(self, origin: Origin, production: Production, reason: int, message: str) -> None:
        raise AssertionError(message)
