"""A user's own project, outside the repository, run as a newcomer runs it (issue 36).

A temporary directory holds a package of the user's (``shop/``), its topology and its
deployment; from there, with no ``PYTHONPATH`` at all, ``millrace check``, ``millrace
up`` (running the injector, the node and the sink), ``millrace inject --finish`` and
``millrace status`` work as written, the sink file holds exactly the results the user's
code computes, and the sink's metrics count them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import free_port, wait_until

pytestmark = pytest.mark.slow

COMPUTATION = '''
import json

from millrace.computations import JSON, Computation, Context, FiredTimer, Record


class Totals(Computation):
    """Sums each customer's order amounts; emits the total when its day closes."""

    def process_record(self, ctx: Context, record: Record) -> None:
        day = record.event_time_ms - record.event_time_ms % 86_400_000
        total = ctx.get_state(str(day), JSON) or 0
        ctx.put_state(str(day), total + json.loads(record.value)["amount"], JSON)
        ctx.set_timer(str(day), day + 86_399_999)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        total = ctx.get_state(timer.tag, JSON)
        ctx.produce("totals", ctx.key, json.dumps({"day": int(timer.tag), "total": total}).encode())
        ctx.delete_state(timer.tag)
'''
TOPOLOGY = """
[streams.orders]
[streams.totals]

[computations.totals]
handler = "shop.totals:Totals"
intervals = 2
inputs = { orders = "key" }
outputs = ["totals"]
"""


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", *args],
        cwd=cwd, env=user_env(), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def user_env() -> dict[str, str]:
    """The user's environment: the installed millrace, no PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_a_project_outside_the_repository_runs_with_the_commands_as_documented(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "shop").mkdir(parents=True)
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "totals.py").write_text(COMPUTATION)
    (project / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in ("injector", "node", "sink", "sink_metrics")}
    (project / "deployment.toml").write_text(f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 0
[nodes.totals]
computation = "totals"
intervals = [0, 1]
address = "127.0.0.1:{ports["node"]}"
[sinks.totals]
address = "127.0.0.1:{ports["sink"]}"
metrics_port = {ports["sink_metrics"]}
path = "out/totals.jsonl"
""")  # fmt: skip
    orders = [(f"c{i % 4}", 10 + i, 1_700_000_000_000 + i * 3_600_000) for i in range(60)]
    (project / "orders.jsonl").write_text("".join(
        json.dumps({"key": c, "value": {"amount": a}, "ts": t}) + "\n" for c, a, t in orders
    ))  # fmt: skip
    expected: dict[tuple[str, int], int] = {}
    for customer, amount, ts in orders:
        day = ts - ts % 86_400_000
        expected[(customer, day)] = expected.get((customer, day), 0) + amount

    checked = run(["check", "--config", "deployment.toml"], project)
    assert checked.returncode == 0 and "OK" in checked.stdout, checked.stderr
    up = subprocess.Popen(
        [sys.executable, "-m", "millrace", "up", "--config", "deployment.toml",
         "--data-dir", "data"],
        cwd=project, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("running (Ctrl-C to stop)" in line for line in lines), 90,
                   "millrace up running")  # fmt: skip
        pushed = run(["inject", "--config", "deployment.toml", "--stream", "orders", "--finish",
                      "orders.jsonl"], project)  # fmt: skip
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        out = project / "out" / "totals.jsonl"

        def written() -> int:
            return len(out.read_text().splitlines()) if out.exists() else 0

        wait_until(lambda: written() >= len(expected), 90, "every day's total in the sink file")
        status = run(["status", "--config", "deployment.toml", "--json"], project)
        assert status.returncode == 0, status.stderr
        seen = json.loads(status.stdout)
        assert {n["state"] for n in seen["nodes"]} == {"healthy"}
        assert [(s["stream"], s["state"]) for s in seen["sinks"]] == [("totals", "healthy")]
        time.sleep(0.5)
        got = {}
        for line in out.read_text().splitlines():
            entry = json.loads(line)
            body = entry["value"]  # a JSON value, as JSON
            got[(entry["key"], body["day"])] = body["total"]
        assert got == expected
        assert written() == len(expected), "each total once"
        assert any(f"http://127.0.0.1:{ports['sink_metrics']}/metrics" in line for line in lines)
        scraped = (
            urllib.request.urlopen(f"http://127.0.0.1:{ports['sink_metrics']}/metrics", timeout=10)
            .read()
            .decode()
        )
        assert (
            f'millrace_sink_records_written_total{{stream="totals"}} {len(expected)}.0' in scraped
        )
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
