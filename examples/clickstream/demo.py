"""The Millrace demo: a click-stream through injector, nodes and sinks, checked.

    python -m examples.clickstream.demo [--work DIR] [--seed N]

1. generates clicks (sessions, skewed pages, out-of-order timestamps, late
   stragglers) and the answers of an independent computation;
2. writes a topology and deployment and starts it with ``millrace up``: two
   exactly-once file sinks (``millrace sink``), the injector and three node
   processes;
3. pushes the clicks with ``millrace inject``, then pushes the SAME file again
   (a client retrying: every batch is recognised and nothing is duplicated),
   then the stragglers, then one end-of-input marker click that moves event
   time past the last window;
4. waits until the sinks hold every window's count and every user's top
   pages (``dataflow`` panes: the latest pane of a window is its full result),
   compares them with the independent computation, prints the results and
   where metrics are served, and stops everything.

Exit code 0 only when the results equal the independent computation.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from examples.clickstream.generate import (
    MINUTE_MS,
    expected_page_counts,
    expected_top_pages,
    generate,
    write_jsonl,
)
from millrace.dataflow import Pane, Timing, Window
from millrace.local_cluster import millrace, start, stop
from millrace.sinks import parse_line

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = Path(__file__).with_name("topology.toml").read_text()
END_PAGE = "/end-of-input"
"""The page of the end-of-input marker click (its window is left out of the check)."""


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback TCP port that was free a moment ago and that this process has not
    handed out before: the kernel may offer a just-released port again, and two
    services of one deployment must not be given the same one."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def deployment_text(ports: dict[str, int]) -> str:
    return f"""
topology = "topology.toml"

[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 3000
idle_timeout_ms = 2000
metrics_port = {ports["injector_metrics"]}

[nodes.page-counts-0]
computation = "page_counts"
intervals = [0, 1, 2]
address = "127.0.0.1:{ports["page0"]}"
metrics_port = {ports["page0_metrics"]}

[nodes.page-counts-1]
computation = "page_counts"
intervals = [3, 4, 5]
address = "127.0.0.1:{ports["page1"]}"
metrics_port = {ports["page1_metrics"]}

[nodes.user-pages]
computation = "user_pages"
intervals = [0]
address = "127.0.0.1:{ports["users"]}"
metrics_port = {ports["users_metrics"]}

[sinks.page_window_counts]
address = "127.0.0.1:{ports["sink_pages"]}"
path = "out/page_window_counts.jsonl"

[sinks.user_top_pages]
address = "127.0.0.1:{ports["sink_users"]}"
path = "out/user_top_pages.jsonl"
"""


def latest_panes(path: Path) -> dict[tuple[str, Window], Pane]:
    """The newest pane of every key and window in a sink file: the highest pane index,
    which with accumulating panes is the window's whole result so far."""
    latest: dict[tuple[str, Window], Pane] = {}
    if not path.exists():
        return latest
    for line in path.read_bytes().split(b"\n")[:-1]:  # a line being written is left out
        found = parse_line(line)
        if found is None:
            continue
        pane = Pane.decode(found.value)
        at = (pane.key.decode(), pane.window)
        if at not in latest or pane.index > latest[at].index:
            latest[at] = pane
    return latest


def window_counts(path: Path) -> dict[str, int]:
    """``page@window_start`` -> clicks, from the ``page_window_counts`` sink file (the
    end-of-input marker's window left out), as :func:`expected_page_counts` has them."""
    return {
        f"{page}@{window.start}": pane.value
        for (page, window), pane in latest_panes(path).items()
        if page != END_PAGE
    }


def top_pages(path: Path) -> dict[str, Any]:
    """user -> ``[[page, clicks], ...]``, from the ``user_top_pages`` sink file."""
    return {user: pane.value for (user, _), pane in latest_panes(path).items()}


def main() -> int:  # noqa: PLR0915 - one linear script, read top to bottom
    parser = argparse.ArgumentParser(description="Run the Millrace click-stream demo.")
    parser.add_argument("--work", type=Path, default=ROOT / "data" / "demo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=100.0)
    args = parser.parse_args()
    started = time.monotonic()
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    clicks = generate(args.seed)
    regular, stragglers = clicks[:-25], clicks[-25:]
    end_marker = {
        "key": "demo",
        "value": {"user": "demo", "page": END_PAGE},
        "ts": max(c["ts"] for c in clicks) + 2 * MINUTE_MS,
    }
    write_jsonl(work / "clicks.jsonl", regular)
    write_jsonl(work / "stragglers.jsonl", stragglers)
    write_jsonl(work / "end.jsonl", [end_marker])
    expected_counts = expected_page_counts(clicks)
    expected_top = expected_top_pages([*clicks, end_marker])

    ports = {name: free_port() for name in (
        "injector", "injector_metrics", "page0", "page0_metrics", "page1", "page1_metrics",
        "users", "users_metrics", "sink_pages", "sink_users")}  # fmt: skip
    (work / "topology.toml").write_text(TOPOLOGY)
    deployment = work / "deployment.toml"
    deployment.write_text(deployment_text(ports))
    print(f"generated {len(clicks):,} clicks ({len(stragglers)} late stragglers) in {work}")

    processes: list[subprocess.Popen[str]] = []
    logs = work / "logs"
    logs.mkdir()
    try:
        up = ("up", "--deployment", str(deployment), "--data-dir", str(work / "data"))
        processes.append(
            start(up, "millrace up: running", "millrace up", log=logs / "up.log", cwd=ROOT)
        )
        print("injector, 3 nodes and 2 sinks are running as separate processes")

        steps = (
            ("clicks", "clicks.jsonl"),
            ("the same clicks again (a retry)", "clicks.jsonl"),
            ("late stragglers", "stragglers.jsonl"),
            ("an end-of-input marker", "end.jsonl"),
        )
        for label, name in steps:
            command = ("inject", "--config", str(deployment), "--stream", "clicks")
            result = subprocess.run(
                millrace(*command, str(work / name)),
                capture_output=True, text=True, cwd=ROOT, check=False,
            )  # fmt: skip
            if result.returncode != 0:
                print(result.stdout + result.stderr, file=sys.stderr)
                return 1
            accepted = [line for line in result.stdout.splitlines() if "accepted" in line]
            print(f"inject {label}: {accepted[0].strip() if accepted else result.stdout.strip()}")

        pages_path = work / "out" / "page_window_counts.jsonl"
        users_path = work / "out" / "user_top_pages.jsonl"
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            counts = window_counts(pages_path)
            tops = top_pages(users_path)
            if counts == expected_counts and tops == expected_top:
                break
            time.sleep(0.5)
        else:
            missing = len(set(expected_counts) - set(counts))
            wrong = sum(1 for k, v in counts.items() if expected_counts.get(k) != v)
            print(f"FAILED: {missing} windows missing, {wrong} wrong; see {logs}", file=sys.stderr)
            return 1

        totals: Counter[str] = Counter()
        for key, count in counts.items():
            totals[key.split("@")[0]] += count
        print("\nclicks per page (sum of the 1-minute windows, top 5):")
        for page, count in totals.most_common(5):
            print(f"  {page:<12} {count:>6,}")
        corrected = sum(
            1 for pane in latest_panes(pages_path).values() if pane.timing is Timing.LATE
        )
        print(f"{corrected} page windows corrected by late panes (stragglers)")
        print("\ntop pages of three users (`millrace view get`: the sink's materialized view):")
        users = sorted(user for user in tops if user != end_marker["key"])
        for user in users[:3]:
            view = subprocess.run(
                millrace("view", "get", "--config", str(deployment), "--stream",
                         "user_top_pages", "--key", user),
                capture_output=True, text=True, cwd=ROOT, check=False, timeout=30,
            )  # fmt: skip
            latest = json.loads(view.stdout) if view.returncode == 0 else {}
            served = Pane.decode(json.dumps(latest["value"]).encode()).value if latest else None
            if served != tops[user]:
                print(f"FAILED: the view serves {served!r} for {user}: {view.stderr}")
                return 1
            print(f"  {user:<8} {served}")
        print(f"\n{len(counts):,} page windows, {len(users):,} users")
        injector_url = f"http://127.0.0.1:{ports['injector_metrics']}/metrics"
        node_url = f"http://127.0.0.1:{ports['page0_metrics']}/metrics"
        print(f"metrics: {injector_url} (injector), {node_url} (a node)")
        seconds = time.monotonic() - started
        print(
            "OK: window counts and top pages equal an independent computation "
            f"over the generated input ({seconds:.0f} s)"
        )
        return 0
    finally:
        stop(processes)


if __name__ == "__main__":
    raise SystemExit(main())
