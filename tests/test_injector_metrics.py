"""A running injector's Prometheus endpoint: ingest, late records, lags, log size, rejects."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from millrace.deployment import Deployment
from millrace.injector.client import IngestClient
from millrace.injector.server import Injector, InjectorConfig
from tests.support import CollectingSink, NodeProcess, free_port
from tests.test_node_metrics import scrape

pytestmark = pytest.mark.slow


def scrape_labeled(port: int, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` by their sorted label pairs."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def test_injector_exports_its_metrics(tmp_path: Path) -> None:
    sink = CollectingSink()
    mirror = CollectingSink()  # the node of a second first computation: acks everything
    ports = {"injector": free_port(), "node": free_port(), "metrics": free_port()}
    (tmp_path / "topology.toml").write_text(
        """
[streams.events]
[streams.ok]
[computations.fwd]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
[computations.mirror]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
"""
    )
    (tmp_path / "incoming").mkdir()
    (tmp_path / "incoming" / "part-000.jsonl").write_text('{"key": "k"}\n')
    deployment_path = tmp_path / "deployment.toml"
    deployment_path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 0
metrics_port = {ports["metrics"]}
file_sources = {{ events = "incoming" }}
[nodes.fwd]
computation = "fwd"
intervals = [0]
address = "127.0.0.1:{ports["node"]}"
[nodes.mirror]
computation = "mirror"
intervals = [0]
address = "{mirror.address}"
[sinks.ok]
address = "{sink.address}"
"""
    )
    deployment = Deployment.load(deployment_path)
    injector = Injector(
        deployment,
        tmp_path / "log",
        address=f"127.0.0.1:{ports['injector']}",
        config=InjectorConfig(out_of_orderness_ms=0, idle_timeout_ms=60_000),
        metrics_port=ports["metrics"],
    )
    injector.start()
    node = NodeProcess(deployment_path, "fwd", tmp_path / "data", tmp_path)
    node.start()
    client = IngestClient(f"127.0.0.1:{ports['injector']}")
    try:
        now = time.time_ns() // 1_000_000
        client.ingest("events", [(b"k", b"1", now + i) for i in range(100)], idempotency_key="a")
        deadline = time.monotonic() + 20
        while len(sink.records) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # let the watermark move past the first batch
        client.ingest("events", [(b"k", b"2", now - 60_000)], idempotency_key="late")
        client.ingest("events", [(b"k", b"2", now - 60_000)], idempotency_key="late")  # replay
        values = scrape(injector.metrics_port)
        assert values["millrace_ingested_records_total"] == 101, "the replay appended nothing"
        assert values["millrace_late_records_total"] == 1, "a replay is not late again"
        assert values["millrace_log_append_seconds_count"] >= 2
        assert values["millrace_log_segments"] >= 1
        assert values["millrace_log_bytes"] > 0
        assert "millrace_forwarding_lag_records" in values
        assert "millrace_forwarding_lag_seconds" in values
        assert "millrace_watermark_lag_seconds" in values
        assert "millrace_low_watermark_ms" in values
        assert "millrace_idle_source_advances_total" in values
        for name in ("millrace_forwarding_lag_records", "millrace_forwarding_lag_seconds"):
            assert set(scrape_labeled(injector.metrics_port, name)) == {
                (("consumer", consumer), ("stream", "events")) for consumer in ("fwd", "mirror")
            }, f"{name}: one series per stream and consumer"
        deadline = time.monotonic() + 20
        forwarder = injector.streams["events"].forwarder
        while forwarder.lag_records() and time.monotonic() < deadline:
            time.sleep(0.05)
        lag = scrape_labeled(injector.metrics_port, "millrace_forwarding_lag_records")
        assert set(lag.values()) == {0.0}, "both consumers acknowledged everything"
        rejected = "millrace_file_source_rejected_lines_total"
        expected = {(("stream", "events"),): 1.0}  # the one malformed line
        while scrape_labeled(injector.metrics_port, rejected) != expected:
            assert time.monotonic() < deadline, scrape_labeled(injector.metrics_port, rejected)
            time.sleep(0.05)
    finally:
        client.close()
        node.terminate()
        injector.stop()
        sink.stop()
        mirror.stop()
