"""Weak productions: send before the commit, checkpoint only what is not acked in time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.computations import IntervalId, Topology
from millrace.engine import IntervalProcessor
from millrace.engine._production_ids import Production
from millrace.statestore import StateStore
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.support import (
    CollectingSink,
    NodeProcess,
    SourceDriver,
    forwarding_deployment,
    free_port,
    numbered_records,
    wait_quiescent,
)


def weak_topology(threshold_ms: int = 200) -> dict[str, Any]:
    return {
        "streams": {"in": {}, "ok": {}},
        "computations": {
            "fwd": {
                "handler": "tests.workloads:Poison",
                "inputs": {"in": "key"},
                "outputs": ["ok"],
                "productions": "weak",
                "weak_threshold_ms": threshold_ms,
            }
        },
    }


def records(start: int, count: int) -> list[record_pb2.Record]:
    return numbered_records(start, count, keys=5)


def test_only_unacked_productions_are_checkpointed(tmp_path: Path) -> None:
    topology = Topology.from_dict(weak_topology())
    store = StateStore.open_rocksdb(tmp_path / "s")
    processor = IntervalProcessor(
        topology=topology, computation="fwd", interval=0, store=store, epoch=1
    )
    sent: list[Production] = []

    def half_acked(productions: list[Production]) -> set[bytes]:
        sent.extend(productions)
        return {p.outbox_key for p in productions[::2]}

    outcome = processor.process_records(records(0, 10), send_first=half_acked)
    assert len(sent) == 10, "productions go out before the commit"
    assert len(outcome.committed) == 10
    stored = [p.outbox_key for p in processor.pending_productions()]
    assert stored == [p.outbox_key for p in sent[1::2]], "only the unacked are checkpointed"
    assert len(processor.in_flight) == 5

    # A replay after a crash (the commit above never happened) yields the same ids.
    replay_store = StateStore.open_rocksdb(tmp_path / "replay")
    replay = IntervalProcessor(
        topology=topology, computation="fwd", interval=0, store=replay_store, epoch=1
    )
    again = replay.process_records(records(0, 10)).productions
    assert [p.record.record_id for p in again] == [p.record.record_id for p in sent]
    store.close()
    replay_store.close()


class SlowSink(CollectingSink):
    """Acks after a delay longer than the weak threshold, so some get checkpointed."""

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for ack in super().Deliver(request_iterator, context):
            time.sleep(0.3)
            yield ack


@pytest.mark.slow
def test_weak_pipeline_is_exactly_once_across_a_kill(tmp_path: Path) -> None:
    sink = SlowSink()
    port = free_port()
    weak = 'productions = "weak"\nweak_threshold_ms = 100'
    deployment = forwarding_deployment(tmp_path, port, sink.address, computation_settings=weak)
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path)
    node.start()
    topology = Topology.load(tmp_path / "topology.toml")
    driver = SourceDriver(topology, "in", {IntervalId("fwd", 0): f"127.0.0.1:{port}"})
    try:
        driver.send(records(0, 3000))
        time.sleep(0.5)
        node.kill()
        node.start()
        driver.send(records(2000, 2000))  # overlaps: duplicate deliveries
        deadline = time.monotonic() + 60
        while (driver.unacked() or len(sink.records) < 4000) and time.monotonic() < deadline:
            time.sleep(0.05)
        wait_quiescent([f"127.0.0.1:{port}"], 60)  # nothing left to resend: final
        assert sorted(json.loads(v) for v in sink.values()) == list(range(4000))
    finally:
        driver.stop()
        node.terminate()
        sink.stop()
