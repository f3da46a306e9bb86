"""Crash-test appender: appends numbered requests to a stream log, forever.

Run as ``python -m tests.injector_log.crash_appender LOG_DIR`` (from the
repository root). ``test_crash.py`` starts it, SIGKILLs it at a random
instant and checks what the log kept.

It opens the log with fsync on and small segments (so kills also land
around rolls), finds the newest request tag in the log's commits and goes
on from the next one. Each call appends 1-6 requests from
:func:`tests.injector_log.workload.request` (every 25th one 1,500 records, so
a kill can land inside a large write).

Stdout protocol, one flushed line per event:

- ``begin <first tag> <last tag>``: ``append`` of these requests is about to be called;
- ``acked <tag> <first offset> <count>``: ``append`` returned for request ``tag``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from millrace.injector.log import LogConfig, StreamLog
from tests.injector_log.workload import STREAM, request, tag_of

CONFIG = LogConfig(segment_bytes=256 << 10, index_every=50, fsync=True)
BIG_EVERY = 25
"""Every 25th request carries 1,500 records (about 150 KB)."""
EXIT_USAGE = 2


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.injector_log.crash_appender LOG_DIR", file=sys.stderr)
        return EXIT_USAGE
    log = StreamLog.open(Path(argv[0]), STREAM, config=CONFIG)
    tag = 0
    for commit in log.commits():
        tag = tag_of(commit.idempotency_key) + 1
    rng = random.Random(tag)
    out = sys.stdout
    while True:
        tags = range(tag, tag + rng.randint(1, 6))
        requests = [request(t, big_every=BIG_EVERY) for t in tags]
        out.write(f"begin {tags[0]} {tags[-1]}\n")
        out.flush()
        results = log.append(requests)
        out.write(
            "".join(
                f"acked {t} {r.first_offset} {r.count}\n"
                for t, r in zip(tags, results, strict=True)
            )
        )
        out.flush()
        tag = tags[-1] + 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
