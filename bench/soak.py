"""Soak: the demo topology and a join for a fixed time under load and SIGKILLs; nothing
may grow.

``millrace up`` runs the click-stream demo's injector and three nodes, plus a
fourth node joining ad impressions with the clicks of the same user
(``millrace.dataflow:IntervalJoin``: a click up to 2 s of event time after an impression);
three ``millrace sink`` processes take the outputs. For ``--minutes`` a feeder
ingests clicks at ``--rate`` per second and impressions at a tenth of it (300
users, 40 pages: the keys stay the same while the records keep coming), event time
running ``--speedup`` times faster
than the clock so that windows close, expire and are forgotten many times over;
every ``--kill-every`` seconds a random service (the injector or a node) is
SIGKILLed and ``millrace up`` restarts it. Every ``--sample-every`` seconds it
samples each process's resident memory, open files and threads, the disk use of
the log, the node stores and the sinks' indexes, and each store's rows per column
family per key (counted exactly: ``bench/_store_rows.py``).

At the end the input stops, an end-of-input click closes the last windows, and the
sinks must equal an independent count of what was ingested (every window's clicks,
every user's top pages, and every impression-click pair: their number and a hash of
the multiset) with no record written twice. Then, for each sampled
figure, the slope over the samples after ``--warmup`` (a share of the run): a
figure *grows with the records* when its least-squares slope would add more than
``--tolerance`` of its mean over the measured stretch (and more than a small
absolute floor); the run fails when any does, or when the output is wrong.
Retention is short here (``--retention-s``: dedup ids, log segments) so that
what is kept by time reaches its plateau within the run.

    python bench/soak.py [--minutes 30] [--rate 400] [--speedup 120] [--kill-every 60]

Prints a table and ``RESULT bench=soak ...`` lines; exit 1 when it fails.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._soak_oracles import (  # noqa: E402
    JOIN_SPAN_MS,
    MINUTE_MS,
    JoinOracle,
    Oracle,
    joined_pairs,
)
from bench._store_rows import exact_rows  # noqa: E402
from examples.clickstream.demo import END_PAGE, TOPOLOGY, free_port, top_pages, window_counts  # noqa: E402
from millrace.injector.client import IngestClient  # noqa: E402
from millrace.local_cluster import pid_of, start, stop  # noqa: E402

USERS = 300
PAGES = [f"/page/{i}" for i in range(40)]
WEIGHTS = [1 / (i + 1) for i in range(len(PAGES))]
BASE_MS = 1_700_000_000_000
STORES = {
    "page-counts-0": ("page_counts", (0, 1, 2)),
    "page-counts-1": ("page_counts", (3, 4, 5)),
    "user-pages": ("user_pages", (0,)),
    "ad-clicks": ("ad_clicks", (0,)),
}
"""Each node's computation and intervals (a store each: data/nodes/COMPUTATION/INTERVAL)."""
NODES = tuple(STORES)
SINKS = ("page_window_counts", "user_top_pages", "ad_clicks")
JOIN_TOPOLOGY = f"""
# The soak's join: each click within {JOIN_SPAN_MS} ms (event time) after an impression of
# the same user, a pair per match.
[streams.impressions]
[streams.ad_clicks]

[computations.ad_clicks]
handler = "millrace.dataflow:IntervalJoin"
inputs = {{ impressions = "key", clicks = "key" }}
outputs = ["ad_clicks"]

[computations.ad_clicks.params]
left = "impressions"
right = "clicks"
lower_ms = 0
upper_ms = {JOIN_SPAN_MS}
allowed_lateness_ms = 3600000
output = "ad_clicks"
"""
SERVICES = ("injector", *NODES)
ABSOLUTE_FLOOR = {"rss_mib": 8.0, "fds": 16.0, "threads": 4.0, "disk_mib": 8.0, "rows": 2.0}
"""Growth below these over the measured stretch is noise, whatever the ratio. A store's
open files come and go with its flushes and compactions (up to four level-0 files per
column before they are merged, and the WAL files): a node that writes much state, as
the join does, holds a dozen more files after its first minutes than at its start."""


def deployment_text(ports: dict[str, int], retention_ms: int) -> str:
    """The demo's deployment with short retention (ids, log segments) and metrics."""
    nodes = "".join(
        f"""
[nodes.{name}]
computation = "{computation}"
intervals = [{", ".join(map(str, intervals))}]
address = "127.0.0.1:{ports[name]}"
metrics_port = {ports[name + "-metrics"]}
dedup_retention_ms = {retention_ms}
"""
        for name, (computation, intervals) in STORES.items()
    )
    sinks = "".join(
        f"""
[sinks.{stream}]
address = "127.0.0.1:{ports[stream]}"
path = "out/{stream}.jsonl"
dedup_retention_ms = {retention_ms}
external = true  # started here, each sampled and killed by its own pid
"""
        for stream in SINKS
    )
    return f"""
topology = "topology.toml"

[injector]
address = "127.0.0.1:{ports["injector"]}"
out_of_orderness_ms = 3000
idle_timeout_ms = 2000
metrics_port = {ports["injector-metrics"]}
segment_ms = {max(1_000, retention_ms // 4)}
retention_ms = {retention_ms}
{nodes}{sinks}"""


class Feeder(threading.Thread):
    """Ingests clicks at a steady rate, event time running ``speedup`` times the clock."""

    def __init__(self, address: str, rate: int, speedup: float, seed: int) -> None:
        super().__init__(name="soak-feeder", daemon=True)
        self._client = IngestClient(address)
        self._rate, self._speedup = rate, speedup
        self._rng = random.Random(seed)
        self.oracle = Oracle()
        self.joined = JoinOracle(slack_ms=2_000)
        self.stopping = threading.Event()
        self.newest_ms = BASE_MS
        self.requests = 0

    def run(self) -> None:
        started = time.monotonic()
        tick = 0.1
        while not self.stopping.is_set():
            due = started + self.requests * tick
            time.sleep(max(0.0, due - time.monotonic()))
            now_ms = BASE_MS + int((time.monotonic() - started) * self._speedup * 1000)
            self._send(now_ms, max(1, round(self._rate * tick)))

    def _send(self, now_ms: int, count: int) -> None:
        rng, records, impressions = self._rng, [], []
        for _ in range(count):
            user = f"user{rng.randrange(USERS)}"
            page = rng.choices(PAGES, WEIGHTS)[0]
            ts = now_ms - rng.randrange(2_000)  # out of order, within the 3 s bound
            value = json.dumps({"user": user, "page": page})
            records.append((user.encode(), value.encode(), ts))
            self.oracle.add(user, page, ts)
            self.joined.click(user, ts, value)
            self.newest_ms = max(self.newest_ms, ts)
        for _ in range(max(1, count // 10)):
            user = f"user{rng.randrange(USERS)}"
            ts = now_ms - rng.randrange(2_000)
            value = json.dumps({"user": user, "ad": f"ad{rng.randrange(20)}"})
            impressions.append((user.encode(), value.encode(), ts))
            self.joined.impression(user, ts, value)
        self.joined.forget_before(now_ms)
        # The same key on every retry: a request the injector logged before it died is
        # recognised, never appended twice.
        self._client.ingest("clicks", records, idempotency_key=f"soak-{self.requests}",
                            give_up_after_s=300)  # fmt: skip
        self._client.ingest("impressions", impressions, give_up_after_s=300,
                            idempotency_key=f"soak-imp-{self.requests}")  # fmt: skip
        self.requests += 1

    def finish(self) -> None:
        """Stop, then one click past every window: the last windows close."""
        self.stopping.set()
        self.join()
        end = self.newest_ms + 2 * MINUTE_MS
        value = json.dumps({"user": "demo", "page": END_PAGE}).encode()
        self._client.ingest("clicks", [(b"demo", value, end)], idempotency_key="soak-end")
        self.oracle.per_user["demo"][END_PAGE] += 1
        self._client.close()


def process_figures(pid: int) -> dict[str, float]:
    """Resident memory (MiB), open files and threads of a process, from /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except (FileNotFoundError, ProcessLookupError):
        return {}
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
        "threads": float(fields["Threads"].strip()),
        "fds": float(fds),
    }


def disk_mib(path: Path) -> float:
    """Bytes under ``path``, in MiB (files vanishing under the walk are skipped)."""
    total = 0
    for item in path.rglob("*") if path.exists() else ():
        try:
            if item.is_file():
                total += item.stat().st_size
        except FileNotFoundError:
            continue
    return total / 2**20


def sample(
    work: Path, deployment: Path, ports: dict[str, int], sinks: dict[str, int]
) -> dict[str, float]:
    """One sample of every figure, named ``what.figure``."""
    figures: dict[str, float] = {}
    pids = {service: pid_of(deployment, service) for service in SERVICES}
    pids.update({f"sink-{stream}": pid for stream, pid in sinks.items()})
    for name, pid in pids.items():
        for figure, value in (process_figures(pid) if pid else {}).items():
            figures[f"{name}.{figure}"] = value
    data = work / "data"
    figures["log.disk_mib"] = disk_mib(data / "log")
    figures["stores.disk_mib"] = disk_mib(data / "nodes")
    for stream in sinks:
        figures[f"sink-{stream}.index.disk_mib"] = disk_mib(work / "out" / f".{stream}.jsonl.index")
    keys = {
        "page-counts-0": len(PAGES), "page-counts-1": len(PAGES), "user-pages": USERS,
        "ad-clicks": USERS,
    }  # fmt: skip
    dirs = {node: [data / "nodes" / c / str(i) for i in held] for node, (c, held) in STORES.items()}
    counted = exact_rows([d for node_dirs in dirs.values() for d in node_dirs])
    for node, store_dirs in dirs.items():
        rows: dict[str, int] = {}
        for store_dir in store_dirs:
            for column, count in counted.get(str(store_dir), {}).items():
                rows[column] = rows.get(column, 0) + count
        for column, count in rows.items():
            # Not dedup (ids are kept by time: the retention): the rows per key that must
            # not grow are state, timers, outbox and meta.
            if column != "dedup":
                figures[f"{node}.{column}.rows"] = count / keys[node]
    return figures


def slope_report(
    samples: list[tuple[float, dict[str, float]]], warmup: float, tolerance: float
) -> list[tuple[str, float, float, float, bool]]:
    """Per figure: mean after warm-up, slope per minute, growth over the measured stretch
    as a share of the mean, and whether it grows with the records."""
    if not samples:
        return []
    end = samples[-1][0]
    measured = [(t, f) for t, f in samples if t >= end * warmup]
    names = sorted({name for _, figures in measured for name in figures})
    report = []
    for name in names:
        points = [(t, f[name]) for t, f in measured if name in f]
        if len(points) < 3:
            continue
        ts, vs = [p[0] for p in points], [p[1] for p in points]
        mean_t, mean_v = sum(ts) / len(ts), sum(vs) / len(vs)
        var = sum((t - mean_t) ** 2 for t in ts)
        slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0
        grown = slope * (ts[-1] - ts[0])
        share = grown / mean_v if mean_v else 0.0
        floor = ABSOLUTE_FLOOR.get(name.rsplit(".", 1)[-1], 0.0)
        report.append((name, mean_v, slope * 60, share, share > tolerance and grown > floor))
    return report


def main() -> int:  # noqa: PLR0915 - one linear run, read top to bottom
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=int, default=400, help="clicks per second")
    parser.add_argument("--speedup", type=float, default=120, help="event time / wall time")
    parser.add_argument("--kill-every", type=float, default=60, help="seconds (0: none)")
    parser.add_argument("--sample-every", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=0.3, help="share of the run left out")
    parser.add_argument("--tolerance", type=float, default=0.25)
    parser.add_argument("--retention-s", type=float, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--judge", default=",".join(ABSOLUTE_FLOOR),
        help="which figures can fail the run (comma-separated: rss_mib, fds, threads, "
        "disk_mib, rows; the rest are printed only)",
    )  # fmt: skip
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="millrace-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    names = ["injector", "injector-metrics", *SINKS, *NODES, *(n + "-metrics" for n in NODES)]
    ports = {name: free_port() for name in names}
    (work / "topology.toml").write_text(TOPOLOGY + JOIN_TOPOLOGY)
    deployment = work / "deployment.toml"
    deployment.write_text(deployment_text(ports, int(args.retention_s * 1000)))
    rng = random.Random(args.seed)
    processes: list[subprocess.Popen[str]] = []
    samples: list[tuple[float, dict[str, float]]] = []
    kills: list[str] = []
    sinks: dict[str, int] = {}
    try:
        for stream in SINKS:
            command = ("sink", "--deployment", str(deployment), "--stream", stream)
            process = start(
                command, "serving", f"sink {stream}", log=work / f"sink-{stream}.log", cwd=ROOT
            )
            processes.append(process)
            sinks[stream] = process.pid
        up = ("up", "--deployment", str(deployment), "--data-dir", str(work / "data"))
        processes.append(start(up, "millrace up: running", "up", log=work / "up.log", cwd=ROOT))
        feeder = Feeder(f"127.0.0.1:{ports['injector']}", args.rate, args.speedup, args.seed)
        feeder.start()
        started = time.monotonic()
        duration = args.minutes * 60
        next_kill = args.kill_every or float("inf")
        while (elapsed := time.monotonic() - started) < duration:
            if not feeder.is_alive():
                raise RuntimeError("the feeder stopped (see the up log)")
            if elapsed >= next_kill:
                service = rng.choice(SERVICES)
                pid = pid_of(deployment, service)
                if pid is not None:
                    subprocess.run(["kill", "-9", str(pid)], check=False)
                    kills.append(service)
                next_kill += args.kill_every
            samples.append((elapsed, sample(work, deployment, ports, sinks)))
            time.sleep(args.sample_every)
        ingested_s = time.monotonic() - started
        feeder.finish()
        expected_counts = dict(feeder.oracle.windows)
        expected_top = feeder.oracle.top_pages()
        expected_pairs = (feeder.joined.pairs, feeder.joined.hash_sum)
        pages, users, joined = (work / "out" / f"{stream}.jsonl" for stream in SINKS)
        deadline = time.monotonic() + 300
        counts: dict[str, int] = {}
        tops: dict[str, object] = {}
        pairs = (0, 0)
        while time.monotonic() < deadline:
            counts, tops, pairs = window_counts(pages), top_pages(users), joined_pairs(joined)
            if counts == expected_counts and tops == expected_top and pairs == expected_pairs:
                break
            time.sleep(2)
        duplicates = 0
        for path in (pages, users, joined):
            ids = [json.loads(line)["record_id"] for line in path.read_bytes().splitlines()]
            duplicates += len(ids) - len(set(ids))
    finally:
        stop(processes, timeout=40)
    exact = (
        counts == expected_counts and tops == expected_top and pairs == expected_pairs
        and not duplicates
    )  # fmt: skip
    report = slope_report(samples, args.warmup, args.tolerance)
    judged = set(args.judge.split(","))
    growing = [name for name, *_, grows in report if grows and name.rsplit(".", 1)[-1] in judged]
    rate = feeder.oracle.clicks / ingested_s
    print(f"soak: {args.minutes:g} min, {feeder.oracle.clicks:,} clicks ({rate:,.0f}/s), "
          f"event time x{args.speedup:g}, {len(kills)} SIGKILLs, {len(samples)} samples, "
          f"work dir {work}")  # fmt: skip
    print(f"{'figure':<48} {'mean':>10} {'slope/min':>10} {'growth':>8}")
    for name, mean, per_minute, share, grows in report:
        flag = ("  GROWS" if name in growing else "  grows (not judged)") if grows else ""
        print(f"{name:<48} {mean:>10.2f} {per_minute:>10.3f} {share:>7.1%}{flag}")
    windows_ok = counts == expected_counts
    print(f"output: {len(counts):,} windows {'=' if windows_ok else '!='} oracle, "
          f"{len(tops):,} users' top pages {'=' if tops == expected_top else '!='} oracle, "
          f"{pairs[0]:,} joined pairs {'=' if pairs == expected_pairs else '!='} oracle "
          f"({expected_pairs[0]:,}), {duplicates} duplicate records")  # fmt: skip
    for name, mean, per_minute, share, grows in report:
        print(f"RESULT bench=soak figure={name} mean={mean:.3f} slope_per_min={per_minute:.4f} "
              f"growth={share:.4f} grows={int(grows)}")  # fmt: skip
    print(f"RESULT bench=soak minutes={args.minutes:g} clicks={feeder.oracle.clicks} "
          f"clicks_per_s={rate:.0f} kills={len(kills)} exact={int(exact)} "
          f"growing={len(growing)}")  # fmt: skip
    if growing:
        print("grows with the records: " + ", ".join(growing))
    return 0 if exact and not growing else 1


if __name__ == "__main__":
    sys.exit(main())
