"""One stream, two first computations: each consumer's acknowledged offset survives a restart.

``a`` acknowledges everything, ``b`` nothing. After an injector restart only
``b`` gets the records again. The injector, its log, gRPC and ``forwarded.json``
are real; two in-process ``Delivery`` servers stand in for the nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from millrace.deployment import Deployment
from millrace.injector.client import IngestClient
from millrace.injector.log import offset_of
from millrace.injector.server import Injector, InjectorConfig
from millrace.wire.v1 import delivery_pb2
from tests.support import DeliveryEndpoint, free_port, wait_until

RECORDS = 50


class FakeNode(DeliveryEndpoint):
    """A node endpoint that records every delivered offset and acks only when ``acking``."""

    def __init__(self, *, acking: bool) -> None:
        self.acking = acking
        self.offsets: list[int] = []
        super().__init__(max_workers=4)

    def Deliver(
        self, request_iterator: Iterator[delivery_pb2.DeliveryBatch], context: Any
    ) -> Iterator[delivery_pb2.DeliveryAck]:
        for batch in request_iterator:
            with self._lock:
                self.offsets.extend(offset_of(r.record_id) for r in batch.records)
                acking = self.acking
            if acking:
                yield delivery_pb2.DeliveryAck(
                    batch_seq=batch.batch_seq, committed_ids=[r.record_id for r in batch.records]
                )

    def received(self) -> list[int]:
        with self._lock:
            return sorted(self.offsets)

    def forget(self) -> None:
        with self._lock:
            self.offsets.clear()


def write_deployment(tmp_path: Path, injector_port: int, a: str, b: str) -> Deployment:
    (tmp_path / "topology.toml").write_text(
        """
[streams.events]
[computations.a]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
[computations.b]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
"""
    )
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{injector_port}"
[nodes.a]
computation = "a"
intervals = [0]
address = "{a}"
[nodes.b]
computation = "b"
intervals = [0]
address = "{b}"
"""
    )
    return Deployment.load(path)


def test_after_a_restart_only_the_consumer_that_did_not_ack_gets_records_again(
    tmp_path: Path,
) -> None:
    a, b = FakeNode(acking=True), FakeNode(acking=False)
    port = free_port()
    deployment = write_deployment(tmp_path, port, a.address, b.address)
    state = tmp_path / "log" / "events" / "forwarded.json"

    def start() -> Injector:
        injector = Injector(
            deployment, tmp_path / "log", address=f"127.0.0.1:{port}", config=InjectorConfig()
        )
        injector.start()
        return injector

    everything = list(range(RECORDS))
    try:
        injector = start()
        try:
            client = IngestClient(f"127.0.0.1:{port}")
            client.ingest("events", [(b"k%d" % i, b"v", 1_000 + i) for i in range(RECORDS)],
                          idempotency_key="batch")  # fmt: skip
            client.close()
            forwarder = injector.streams["events"].forwarder
            wait_until(lambda: forwarder.consumer_acked_offset("a") == RECORDS, 20, "a's acks")
            wait_until(lambda: set(b.received()) == set(everything), 20, "b's deliveries")
            assert forwarder.lag_records("a") == 0
            assert forwarder.lag_records("b") == forwarder.lag_records() == RECORDS
        finally:
            injector.stop()
        saved = json.loads(state.read_text())
        assert saved["consumers"] == {"a": RECORDS, "b": 0}
        assert set(a.received()) == set(everything)

        a.forget()
        b.forget()
        b.acking = True
        injector = start()
        try:
            forwarder = injector.streams["events"].forwarder
            # Once every consumer acked the end, anything sent to ``a`` would have been
            # recorded by it: it acks only what it recorded.
            wait_until(lambda: forwarder.acked_offset == RECORDS, 20, "every consumer's acks")
        finally:
            injector.stop()
        assert a.received() == [], "a acknowledged everything before the restart"
        assert set(b.received()) == set(everything)
        assert json.loads(state.read_text())["consumers"] == {"a": RECORDS, "b": RECORDS}
    finally:
        a.stop()
        b.stop()
