"""A table injected once must not hold a flowing stream's windows open (issue 36).

``events`` (flowing, event time = now) are enriched from ``users`` (a table written
once, with hour-old timestamps) and counted in 2-second windows, on real processes.
The ``users`` source is idle after its one write; with ``idle_excluded = ["users"]``
it stops gating the watermark (Flink's idleness), so each window's on-time pane
comes while events still flow, equal to a count of the events sent. Without it, the
table's watermark stays an hour behind and no window closes.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from millrace.injector.client import IngestClient
from tests.support import CollectingSink, InjectorProcess, NodeProcess, free_port

pytestmark = pytest.mark.slow

WINDOW_MS = 2_000
TOPOLOGY = f"""
[streams.events]
[streams.users]
[streams.enriched]
[streams.counts]

[computations.enrich]
handler = "millrace.dataflow:TableJoin"
inputs = {{ events = "key", users = "key" }}
outputs = ["enriched"]
params = {{ stream = "events", table = "users", how = "left", output = "enriched" }}

[computations.counts]
handler = "millrace.dataflow:WindowedAggregation"
inputs = {{ enriched = "key" }}
outputs = ["counts"]
params = {{ window = "tumbling:{WINDOW_MS}", aggregate = "count", output = "counts" }}
"""


def deployment(tmp_path: Path, sink: str, excluded: bool) -> tuple[Path, dict[str, int]]:
    ports = {name: free_port() for name in ("injector", "enrich", "counts")}
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    path = tmp_path / "deployment.toml"
    path.write_text(f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 300
idle_timeout_ms = 1000
idle_excluded = {'["users"]' if excluded else "[]"}
[nodes.enrich]
computation = "enrich"
intervals = [0]
address = "127.0.0.1:{ports["enrich"]}"
[nodes.counts]
computation = "counts"
intervals = [0]
address = "127.0.0.1:{ports["counts"]}"
[sinks.counts]
address = "{sink}"
""")  # fmt: skip
    return path, ports


def run(
    tmp_path: Path, excluded: bool
) -> tuple[dict[tuple[str, int], int], Counter[tuple[str, int]]]:
    """Push the table once, then events for ~6 s; the panes that came meanwhile, and
    the count of events sent per (user, window)."""
    sink = CollectingSink()
    path, ports = deployment(tmp_path, sink.address, excluded)
    injector = InjectorProcess(path, tmp_path / "log", tmp_path / "injector.log")
    nodes = [NodeProcess(path, n, tmp_path / "data", tmp_path) for n in ("enrich", "counts")]
    injector.start()
    for node in nodes:
        node.start()
    client = IngestClient(f"127.0.0.1:{ports['injector']}", timeout_s=5)
    sent: Counter[tuple[str, int]] = Counter()
    try:
        hour_ago = int(time.time() * 1000) - 3_600_000
        users = [
            (f"u{i}".encode(), json.dumps({"tier": i % 3}).encode(), hour_ago) for i in range(5)
        ]
        client.ingest("users", users, idempotency_key="users")
        for batch in range(18):
            now = int(time.time() * 1000)
            events = [(f"u{i % 5}".encode(), b'{"n": 1}', now) for i in range(20)]
            client.ingest("events", events, idempotency_key=f"events-{batch}")
            sent.update((key.decode(), now - now % WINDOW_MS) for key, _, _ in events)
            time.sleep(0.25)
        panes = {}
        for record in list(sink.records.values()):
            pane = json.loads(record.value)
            panes[(pane["key"], pane["window"][0])] = pane["value"]
        return panes, sent
    finally:
        client.close()
        for process in [injector, *nodes]:  # as the other tests: the injector first
            process.terminate()
        sink.stop()


def test_an_idle_table_excluded_lets_windows_close_while_events_flow(tmp_path: Path) -> None:
    panes, sent = run(tmp_path, excluded=True)
    assert panes, "windows closed on time, while events still flowed"
    assert all(panes[pane] == sent[pane] for pane in panes), "each on-time count is exact"


def test_without_idleness_the_table_holds_every_window_open(tmp_path: Path) -> None:
    panes, _ = run(tmp_path, excluded=False)
    assert panes == {}, "the table's watermark is an hour behind: nothing closes"
