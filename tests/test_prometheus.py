"""The Prometheus alert rules and the Grafana dashboard against real binaries.

1. ``promtool`` checks deploy/prometheus/alerts.yml and runs its unit tests
   (alerts_test.yml: each alert fires and does not fire on synthetic series).
2. A real Prometheus server scrapes the click-stream demo's injector and nodes
   (``millrace up`` + ``millrace sink`` + ``millrace inject``), evaluates the
   alert rules, and every ``expr`` of deploy/grafana/millrace.json must return
   data from it, so the dashboard cannot drift from the exported metric names.

Needs Debian's ``prometheus`` package (``prometheus`` and ``promtool``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from examples.clickstream.demo import TOPOLOGY, deployment_text, free_port
from examples.clickstream.generate import generate, write_jsonl
from millrace.local_cluster import millrace, start, stop

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "millrace.json"
ALERTS = (
    "WatermarkLagHigh",
    "ForwardingLagGrowing",
    "DeadLetters",
    "CommitLatencyHigh",
    "NodeDown",
    "InjectorDown",
    "IntervalFenced",
    "LeaseConflict",
)
# What Grafana substitutes into a query; the scrape interval below is 1 s.
GRAFANA_VARIABLES = {
    "$__rate_interval": "30s",
    "$__interval": "5s",
    "$__range": "1m",
    "${__rate_interval}": "30s",
    "${__interval}": "5s",
    "${__range}": "1m",
}
PORT_NAMES = (
    "injector", "injector_metrics", "page0", "page0_metrics", "page1", "page1_metrics",
    "users", "users_metrics", "sink_pages", "sink_users",
)  # fmt: skip
NODE_METRICS = ("page0_metrics", "page1_metrics", "users_metrics")


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(
            f"{binary} not found: install Debian's prometheus package "
            "(apt-get install -y --no-install-recommends prometheus)"
        )
    return path


@pytest.mark.slow
def test_alert_rules_pass_promtool() -> None:
    promtool = require("promtool")
    for command in (
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "alerts_test.yml"),
        ("check", "config", "prometheus.yml"),
    ):
        result = subprocess.run(
            [promtool, *command],
            cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 0, (
            f"promtool {' '.join(command)}:\n{result.stdout}{result.stderr}"
        )
    rules = (PROMETHEUS_DIR / "alerts.yml").read_text()
    tests = (PROMETHEUS_DIR / "alerts_test.yml").read_text()
    for alert in ALERTS:
        assert f"alert: {alert}\n" in rules
        assert f"alertname: {alert}\n" in tests, f"{alert} has no unit test"


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr with Grafana's variables substituted) for every panel target."""
    dashboard = json.loads(DASHBOARD.read_text())
    panels: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # panels inside collapsed rows
    queries = []
    for panel in panels:
        for target in panel.get("targets", []):
            expr: str = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"unsubstituted variable in {panel['title']!r}: {expr}"
            queries.append((panel["title"], expr))
    return queries


def test_dashboard_covers_the_required_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    exprs = " ".join(expr for _, expr in dashboard_queries())
    for metric in (
        "millrace_low_watermark_ms",
        "millrace_watermark_lag_seconds",
        "millrace_records_committed_total",
        "millrace_ingested_records_total",
        "millrace_duplicates_dropped_total",
        "millrace_dedup_bloom_negatives_total",
        "millrace_dedup_store_confirmations_total",
        "millrace_commit_seconds_bucket",
        "millrace_outbox_size",
        "millrace_forwarding_lag_records",
        "millrace_delivery_queued",
        "millrace_dead_letters_total",
        "millrace_late_records_total",
    ):
        assert re.search(rf"\b{metric}\b", exprs), f"no panel queries {metric}"
    assert "histogram_quantile(0.5," in exprs
    assert "histogram_quantile(0.99," in exprs


def api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


def query(port: int, expr: str) -> list[Any]:
    data = api(port, "/api/v1/query", query=expr)
    result: list[Any] = data["result"]
    return result


def wait_targets_up(port: int, expected: int, prometheus: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    health: list[str] = []
    while time.monotonic() < deadline:
        assert prometheus.poll() is None, "prometheus exited"
        try:
            targets = api(port, "/api/v1/targets")["activeTargets"]
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
            continue
        health = [t["health"] for t in targets]
        if len(health) == expected and all(h == "up" for h in health):
            return
        time.sleep(0.2)
    raise AssertionError(f"scrape targets not up within 20 s: {health}")


def prometheus_config(ports: dict[str, int]) -> str:
    nodes = ", ".join(f'"127.0.0.1:{ports[name]}"' for name in NODE_METRICS)
    return f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {PROMETHEUS_DIR / "alerts.yml"}
scrape_configs:
  - job_name: millrace-injector
    static_configs:
      - targets: ["127.0.0.1:{ports["injector_metrics"]}"]
  - job_name: millrace-nodes
    static_configs:
      - targets: [{nodes}]
"""


@pytest.mark.slow
def test_prometheus_scrapes_the_demo_and_every_dashboard_query_has_data(tmp_path: Path) -> None:
    prometheus_bin = require("prometheus")
    clicks = tmp_path / "clicks.jsonl"
    write_jsonl(clicks, generate(7, sessions=1_000))
    ports = {name: free_port() for name in PORT_NAMES}
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(deployment_text(ports))
    logs = tmp_path / "logs"
    logs.mkdir()
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(ports))
    web_port = free_port()

    processes: list[subprocess.Popen[str]] = []
    try:
        up = ("up", "--deployment", str(deployment), "--data-dir", str(tmp_path / "data"))
        processes.append(start(up, "millrace up: running", "up", log=logs / "up.log", cwd=ROOT))

        prometheus = subprocess.Popen(
            [
                prometheus_bin,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{web_port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL, stderr=open(logs / "prometheus.log", "w"),  # noqa: SIM115
            text=True, cwd=tmp_path,
        )  # fmt: skip
        processes.append(prometheus)
        wait_targets_up(web_port, 1 + len(NODE_METRICS), prometheus)

        injected = subprocess.run(
            millrace("inject", "--deployment", str(deployment), "--stream", "clicks", str(clicks)),
            capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip
        assert injected.returncode == 0, injected.stdout + injected.stderr

        # The alert rules load into a real server and evaluate without errors.
        groups = api(web_port, "/api/v1/rules")["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        assert set(rules) == set(ALERTS)

        checks = [
            ("watermark lag", "millrace_watermark_lag_seconds"),
            ("throughput", "rate(millrace_records_committed_total[30s])"),
            ("ingest rate", "rate(millrace_ingested_records_total[30s])"),
            *dashboard_queries(),
        ]
        empty: list[tuple[str, str]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            empty = [(title, expr) for title, expr in checks if not query(web_port, expr)]
            if not empty:
                break
            time.sleep(1)
        assert not empty, f"queries without data: {empty}"

        committed = query(web_port, "sum(millrace_records_committed_total)")
        assert float(committed[0]["value"][1]) > 0
        groups = api(web_port, "/api/v1/rules")["groups"]
        unhealthy = [
            (rule["name"], rule.get("lastError"))
            for group in groups
            for rule in group["rules"]
            if rule["health"] not in ("ok", "unknown")
        ]
        assert not unhealthy, unhealthy
    finally:
        stop(processes)
