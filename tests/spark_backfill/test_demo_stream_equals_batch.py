"""Stream equals batch on the demo's own topology (slow): the click-stream demo's
computations run online as real processes (``millrace up``, two file sinks), then
the backfill's stages run over the injector's log. Every record the sinks hold is
in the backfill, under the same record id, with the same key, value and event
time, at the deployed interval counts and at others; what only the backfill has
are the panes that need the end of input (the watermark at +infinity), which the
online system never reached.

No late data here (the comparison needs that): the demo's clicks without its
stragglers, in event-time order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from examples.clickstream.demo import END_PAGE, TOPOLOGY, deployment_text, top_pages, window_counts
from examples.clickstream.generate import (
    MINUTE_MS,
    expected_page_counts,
    expected_top_pages,
    generate,
    write_jsonl,
)
from millrace.computations import Topology
from millrace.local_cluster import start, stop
from millrace.sinks import read_sink_records
from millrace.spark_jobs.batch import with_intervals
from tests.spark_backfill._topologies import local_backfill, log_records
from tests.support import ROOT, free_port, wait_until

OUT_OF_ORDERNESS_MS = 3_000
"""The demo deployment's bounded out-of-orderness: the online watermark's lag."""
SINKS = ("page_window_counts", "user_top_pages")


@pytest.mark.slow
def test_the_demo_topology_backfill_equals_the_nodes_id_for_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the processes import examples.clickstream
    clicks = sorted(generate(7, sessions=800)[:-25], key=lambda c: c["ts"])  # no stragglers
    end_ts = clicks[-1]["ts"] + 2 * MINUTE_MS
    end_marker = {"key": "demo", "value": {"user": "demo", "page": END_PAGE}, "ts": end_ts}
    write_jsonl(tmp_path / "clicks.jsonl", [*clicks, end_marker])
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    ports = {name: free_port() for name in (
        "injector", "injector_metrics", "page0", "page0_metrics", "page1", "page1_metrics",
        "users", "users_metrics", "sink_pages", "sink_users")}  # fmt: skip
    (tmp_path / "deployment.toml").write_text(deployment_text(ports))
    out = tmp_path / "out"
    processes: list[subprocess.Popen[str]] = []
    try:
        up = ("up", "--deployment", "deployment.toml", "--data-dir", str(tmp_path / "data"))
        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up.log",
                               cwd=tmp_path))  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "millrace", "inject", "--config", "deployment.toml",
             "--stream", "clicks", "clicks.jsonl"],
            check=True, capture_output=True, cwd=tmp_path,
        )  # fmt: skip
        counts, tops = expected_page_counts(clicks), expected_top_pages([*clicks, end_marker])
        wait_until(
            lambda: window_counts(out / "page_window_counts.jsonl") == counts
            and top_pages(out / "user_top_pages.jsonl") == tops,
            120, "every window and every user's top pages in the sinks",
        )  # fmt: skip
    finally:
        stop(processes)

    online = {
        stream: {r.record_id: (r.key, r.value, r.event_time_ms)
                 for r in read_sink_records(out / f"{stream}.jsonl")}
        for stream in SINKS
    }  # fmt: skip
    assert len(online["page_window_counts"]) > 100 and len(online["user_top_pages"]) > 1000
    records = log_records(tmp_path / "data" / "log", "clicks")
    assert len(records) == len(clicks) + 1
    topology = Topology.load(tmp_path / "topology.toml")
    for intervals, batch_size in ((None, 500), (3, 64)):
        batch = local_backfill(with_intervals(topology, intervals), records, batch_size=batch_size)
        for stream in SINKS:
            assert {rid: batch[stream].get(rid) for rid in online[stream]} == online[stream], (
                f"{stream}: intervals {intervals}, batch size {batch_size}"
            )
            only_batch = [batch[stream][rid] for rid in set(batch[stream]) - set(online[stream])]
            # Panes the online watermark (end_ts - out-of-orderness at most) never passed.
            assert all(ts >= end_ts - OUT_OF_ORDERNESS_MS - 1 for _, _, ts in only_batch), stream
