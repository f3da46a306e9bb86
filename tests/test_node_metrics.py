"""A running node's Prometheus endpoint, scraped over HTTP and parsed."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.computations import IntervalId, Topology
from millrace.wire.v1 import record_pb2
from tests.support import CollectingSink, NodeProcess, SourceDriver, free_port

pytestmark = pytest.mark.slow


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + sample.value
    return values


def _topology(tmp_path: Path, handler: str) -> None:
    (tmp_path / "topology.toml").write_text(
        f"""
[streams.in]
[streams.ok]
[computations.poison]
handler = "tests.workloads:{handler}"
inputs = {{ in = "key" }}
outputs = ["ok"]
max_attempts = 1
"""
    )


@pytest.mark.parametrize("handler", ["Poison", "LateReporter"])
def test_node_exports_its_metrics(tmp_path: Path, handler: str) -> None:
    sink = CollectingSink()
    port, metrics_port = free_port(), free_port()
    _topology(tmp_path, handler)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(
        f"""
topology = "topology.toml"
[nodes.p]
computation = "poison"
intervals = [0]
address = "127.0.0.1:{port}"
metrics_port = {metrics_port}
[sinks.ok]
address = "{sink.address}"
"""
    )
    node = NodeProcess(deployment, "p", tmp_path / "data", tmp_path)
    node.start()
    driver = SourceDriver(
        Topology.load(tmp_path / "topology.toml"),
        "in",
        {IntervalId("poison", 0): f"127.0.0.1:{port}"},
    )
    try:
        batch = [
            record_pb2.Record(
                record_id=f"r{i}".encode(), key=b"k", stream="in", event_time_ms=i,
                value=b"poison" if i == 7 else b"late" if i % 10 == 3 else json.dumps(i).encode(),
            )
            for i in range(100)
        ]  # fmt: skip
        driver.send(batch)
        deadline = time.monotonic() + 20
        while driver.unacked() and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.send(batch[:10])  # redelivered after commit: Bloom "maybe", RocksDB confirms
        while (driver.unacked() or len(sink.records) < 99) and time.monotonic() < deadline:
            time.sleep(0.05)
        values = scrape(metrics_port)
        poison = handler == "Poison"
        assert values["millrace_records_committed_total"] == 100
        assert values["millrace_duplicates_dropped_total"] == 10
        assert values["millrace_dead_letters_total"] == (1 if poison else 0)
        assert values["millrace_records_out_total"] == (99 if poison else 100)
        late = values.get("millrace_late_record_lateness_seconds_count", 0)
        assert late == (0 if poison else 10)
        assert values["millrace_commit_seconds_count"] >= 1
        assert values["millrace_batch_records_count"] >= 1
        assert values["millrace_dedup_lookups_total"] >= 110
        assert values["millrace_dedup_store_confirmations_total"] >= 10
        assert "millrace_outbox_size" in values
        assert "millrace_outbox_oldest_age_seconds" in values
        assert "millrace_timers_pending" in values
        assert values["millrace_store_rows"] >= 100, "the 100 record ids, at least"
        assert "millrace_delivery_retries_total" in values
    finally:
        driver.stop()
        node.terminate()
        sink.stop()
