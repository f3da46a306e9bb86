"""The demo topology under ``millrace up``, with SIGKILLs: the sinks still equal the oracle.

While clicks are being injected, random nodes and the injector are SIGKILLed
ten times; ``millrace up`` restarts each one. The sinks' final contents (the
latest pane of each page window and of each user's top pages) must equal the
independent computation over the generated input, and no sink file may hold
any record twice.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from examples.clickstream.demo import (
    END_PAGE,
    TOPOLOGY,
    deployment_text,
    free_port,
    top_pages,
    window_counts,
)
from examples.clickstream.generate import (
    MINUTE_MS,
    expected_page_counts,
    expected_top_pages,
    generate,
    write_jsonl,
)
from millrace.local_cluster import millrace, pid_of, start, stop
from tests.support import ROOT, chaos_kills, chaos_rng

pytestmark = pytest.mark.slow

KILLS = chaos_kills(10)
SERVICES = (
    "injector", "page-counts-0", "page-counts-1", "user-pages",
    "sink-page_window_counts", "sink-user_top_pages",
)  # fmt: skip


def test_demo_under_up_survives_sigkills(tmp_path: Path) -> None:
    rng = chaos_rng(5)
    clicks = generate(11, sessions=1_500)
    regular, stragglers = clicks[:-25], clicks[-25:]
    end = {"key": "demo", "value": {"user": "demo", "page": END_PAGE},
           "ts": max(c["ts"] for c in clicks) + 2 * MINUTE_MS}  # fmt: skip
    write_jsonl(tmp_path / "clicks.jsonl", regular)
    write_jsonl(tmp_path / "stragglers.jsonl", stragglers)
    write_jsonl(tmp_path / "end.jsonl", [end])
    ports = {name: free_port() for name in (
        "injector", "injector_metrics", "page0", "page0_metrics", "page1", "page1_metrics",
        "users", "users_metrics", "sink_pages", "sink_users")}  # fmt: skip
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(deployment_text(ports))
    processes: list[subprocess.Popen[str]] = []
    try:
        up = ("up", "--deployment", str(deployment), "--data-dir", str(tmp_path / "data"))
        processes.append(start(up, "millrace up: running", "up", log=tmp_path / "up.log", cwd=ROOT))

        kills: list[str] = []
        schedule = [rng.choice(SERVICES) for _ in range(KILLS)]
        if "injector" not in schedule:  # every seed must kill the injector at least once
            schedule[rng.randrange(KILLS)] = "injector"

        def chaos() -> None:
            while len(kills) < KILLS:
                time.sleep(rng.uniform(0.3, 0.9))
                service = schedule[len(kills)]
                pid = pid_of(deployment, service)
                if pid is not None:
                    subprocess.run(["kill", "-9", str(pid)], check=False)
                    kills.append(service)

        killer = threading.Thread(target=chaos)
        killer.start()
        inject = ("inject", "--deployment", str(deployment), "--stream", "clicks", "--batch", "50")

        def push(name: str) -> None:
            """Run ``millrace inject`` until it succeeds, as a user would: the injector may be
            mid-restart when it starts (exit 2), and a re-run never duplicates anything."""
            for _ in range(30):
                result = subprocess.run(
                    millrace(*inject, str(tmp_path / name)),
                    capture_output=True, text=True, cwd=ROOT, check=False, timeout=180,
                )  # fmt: skip
                if result.returncode == 0:
                    return
                assert result.returncode == 2, result.stdout + result.stderr
                time.sleep(0.5)
            raise AssertionError(f"could not inject {name}: {result.stderr}")

        while killer.is_alive():
            push("clicks.jsonl")  # again and again: every later pass is a client retry
        killer.join()
        push("stragglers.jsonl")
        push("end.jsonl")
        assert len(kills) == KILLS and "injector" in kills

        expected_counts = expected_page_counts(clicks)
        expected_top = expected_top_pages([*clicks, end])
        pages = tmp_path / "out" / "page_window_counts.jsonl"
        users = tmp_path / "out" / "user_top_pages.jsonl"
        deadline = time.monotonic() + 180
        counts: dict[str, int] = {}
        tops: dict[str, object] = {}
        while time.monotonic() < deadline:
            counts = window_counts(pages)
            tops = top_pages(users)
            if counts == expected_counts and tops == expected_top:
                break
            time.sleep(0.5)
        assert counts == expected_counts, "page window counts differ from the oracle"
        assert tops == expected_top, "top pages differ from the oracle"
        for path in (pages, users):
            ids = [json.loads(line)["record_id"] for line in path.read_bytes().splitlines()]
            assert len(ids) == len(set(ids)), f"{path.name} holds a record twice"
    finally:
        stop(processes, timeout=40)
