"""The injector's forwarder alone: log -> frames -> acks, CPU per record, in one process.

A stream log of ``--records`` standard-workload records (appended 1,000 per
request); a ``Forwarder`` reads it, builds and encodes each frame as a
sender would, and every production is acknowledged at once. CPU seconds of
this process per record, beside the plain-Python floor of
``bench/windows_bench.py`` measured in the same run.

``--json-key``: the consumer has 4 intervals and keys each record by a field of its
JSON value (``json:user``; values ``{"user": "u<id>", "value": <n>}``), so the
forwarder reads every value to pick its interval.

    python bench/forwarder_bench.py [--records N] [--runs R] [--json-key] [--root CHECKOUT]

``--root`` runs another checkout's code (an A/B against an older commit).
Prints a table and one ``RESULT bench=forwarder ...`` line (medians).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = """
[streams.events]
[streams.out]
[computations.agg]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["out"]
"""
JSON_KEYED = TOPOLOGY.replace('"key" }', '"json:user" }\nintervals = 4')


class AckingSubmitter:
    """Encodes each frame (a sender's work) and acknowledges all of it at once."""

    def __init__(self) -> None:
        self.forwarder: Any = None
        self.forwarded = 0

    def submit_frames(self, origin: object, frames: Sequence[Any]) -> None:
        for frame in frames:  # as delivery/_sender.py does: by the frame's outbox keys
            frame.encoded()
            self.forwarded += len(frame)
            self.forwarder.acked_keys(frame.outbox_keys)


def run_once(records: int, work: Path, *, json_key: bool = False) -> float:
    """CPU seconds to forward ``records`` records and take their acks."""
    from bench.standard_workload import workload
    from millrace.computations import Topology
    from millrace.injector.forwarder import Forwarder
    from millrace.injector.log import AppendRequest, StreamLog

    path = work / f"forward-{time.monotonic_ns()}"
    path.mkdir()
    (path / "t.toml").write_text(JSON_KEYED if json_key else TOPOLOGY)
    keys, times, values = workload(records)
    log = StreamLog.open(path / "log" / "events", "events")
    triples = [
        (k.encode(), (b'{"user": "%s", "value": %d}' % (k.encode(), v)) if json_key
         else str(v).encode(), t)
        for k, t, v in zip(keys, times.tolist(), values.tolist(), strict=True)
    ]  # fmt: skip
    for at in range(0, records, 1_000):
        log.append([AppendRequest(records=triples[at : at + 1_000])])
    submitter = AckingSubmitter()
    forwarder = Forwarder(
        log, Topology.load(path / "t.toml"), lambda _c, _i: submitter, path / "forwarded.json"
    )
    submitter.forwarder = forwarder
    try:
        started = time.process_time()
        while forwarder.forwarded_offset < records:
            forwarder._step()
        seconds = time.process_time() - started
        assert submitter.forwarded == records and forwarder.acked_offset == records
        return seconds
    finally:
        log.close()
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json-key", action="store_true", help="key by a JSON field, 4 intervals")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose code runs")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    from bench.standard_workload import plain_python_floor, workload

    work = Path(tempfile.mkdtemp(prefix="millrace-forwarder-bench-"))
    seconds, floors = [], []
    try:
        for _ in range(args.runs):
            floors.append(plain_python_floor(workload(args.records)))
            seconds.append(run_once(args.records, work, json_key=args.json_key))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    us = statistics.median(seconds) / args.records * 1e6
    floor = args.records / statistics.median(floors)
    keyed = "keyed by json:user, 4 intervals" if args.json_key else "keyed as sent"
    print(f"forwarder, {args.records:,} records ({keyed}), code of {args.root}")
    print(f"  {'us/record':>10} {'floor/s':>10}")
    print(f"  {us:>10.2f} {floor:>10,.0f}")
    print(
        f"RESULT bench=forwarder records={args.records} json_key={int(args.json_key)} "
        f"cpu_us_per_record={us:.2f} "
        f"python_floor_events_per_cpu_s={floor:.0f} runs={args.runs}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
