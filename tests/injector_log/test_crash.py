"""Crash atomicity of the log, proven with a real process killed by SIGKILL.

``crash_appender.py`` appends numbered requests (fsync on, small segments,
some large requests) and prints every request ``append`` acknowledged. The
test kills it at random instants, again and again; after every kill it
reopens the log in this process (recovery runs) and checks:

- :func:`offsets_are_dense`: records are ``0..next_offset-1``, segments chain;
- :func:`requests_are_whole_and_in_order`: the commits cover the offsets
  back to back, their tags are ``0..M`` with no gap or repeat, and each
  request's records are exactly the ones it appended (nothing partial);
- :func:`acked_requests_survive`: every acked request is there once, at the
  offsets it was acked with;
- :func:`nothing_unattempted_appears`: ``M`` is no newer than the last
  request the appender began to append.

Then the appender resumes on the recovered log.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from millrace.injector.log import Commit, CorruptEntry, LogRecord, StreamLog, scan_segment
from tests.injector_log.crash_appender import BIG_EVERY
from tests.injector_log.crash_appender import CONFIG as APPENDER_CONFIG
from tests.injector_log.workload import STREAM, matches, record_count, tag_of, triples
from tests.support import chaos_kills

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS = chaos_kills(25)
KILL_DELAY_S = (0.005, 0.250)
"""A kill lands this long after the appender's first ack (log-uniform)."""
STARTUP_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0


@dataclass
class AppenderOutput:
    """Reads the appender's stdout on a thread: begun tags and acked requests."""

    stream: IO[bytes]
    last_begun: int = -1
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    first_ack: threading.Event = field(default_factory=threading.Event)
    eof: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for raw in self.stream:
            words = raw.decode(errors="replace").split()
            if len(words) == 3 and words[0] == "begin":
                self.last_begun = int(words[2])
            elif len(words) == 4 and words[0] == "acked":
                self.acked[int(words[1])] = (int(words[2]), int(words[3]))
                self.first_ack.set()
            else:
                self.unexpected.append(raw.decode(errors="replace"))
        self.eof.set()
        self.first_ack.set()

    def join(self) -> None:
        self._thread.join(EXIT_TIMEOUT_S)
        assert not self._thread.is_alive(), "the appender's stdout never reached end of file"


def run_and_kill(log_dir: Path, delay_s: float, stderr_path: Path) -> AppenderOutput:
    """Start the appender, SIGKILL it ``delay_s`` after its first ack, reap it."""
    with stderr_path.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.injector_log.crash_appender", str(log_dir)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
        )
    try:
        assert child.stdout is not None
        output = AppenderOutput(child.stdout)
        output.first_ack.wait(STARTUP_TIMEOUT_S)
        started = not output.eof.is_set() and bool(output.acked)
        if started:
            time.sleep(delay_s)
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait(EXIT_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output.join()
    errors = stderr_path.read_text(errors="replace")
    assert returncode == -signal.SIGKILL, f"the appender exited by itself ({returncode}):\n{errors}"
    assert started, f"the appender acked nothing in {STARTUP_TIMEOUT_S} s:\n{errors}"
    assert not output.unexpected, output.unexpected[:5]
    return output


def kill_delay(rng: random.Random) -> float:
    low, high = KILL_DELAY_S
    return float(low * (high / low) ** rng.random())


# ---------------------------------------------------------------------------
# Invariants over the reopened log
# ---------------------------------------------------------------------------


def offsets_are_dense(log: StreamLog, records: list[LogRecord], start: int) -> bool:
    """Segments chain from offset 0; ``records`` (read from ``start``) run to ``next_offset``."""
    segments = log.segments()
    chained = all(a.end_offset == b.base_offset for a, b in itertools.pairwise(segments))
    offsets = [r.offset for r in records]
    return (
        chained and segments[0].base_offset == 0 and offsets == list(range(start, log.next_offset))
    )


def requests_are_whole_and_in_order(
    commits: list[Commit], records: list[LogRecord], start: int
) -> bool:
    """Commits are tags 0..M back to back from offset 0, and every request from ``start`` on
    holds exactly its own records (``records`` begin at offset ``start``)."""
    offset = 0
    for number, commit in enumerate(commits):
        tag = tag_of(commit.idempotency_key)
        expected_count = record_count(tag, big_every=BIG_EVERY)
        if tag != number or commit.first_offset != offset or commit.count != expected_count:
            return False
        if offset >= start:
            got = records[offset - start : offset - start + commit.count]
            want = triples(tag, expected_count)
            if len(got) != len(want) or not all(map(matches, got, want)):
                return False
        offset += commit.count
    return offset == start + len(records)


def acked_requests_survive(commits: list[Commit], acked: dict[int, tuple[int, int]]) -> bool:
    by_tag = {tag_of(c.idempotency_key): (c.first_offset, c.count) for c in commits}
    return all(by_tag.get(tag) == where for tag, where in acked.items())


def nothing_unattempted_appears(commits: list[Commit], last_begun: int) -> bool:
    return not commits or tag_of(commits[-1].idempotency_key) <= last_begun


def test_sigkilled_appends_are_all_or_nothing_and_acked_ones_survive(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    rng = random.Random(20240229)
    acked: dict[int, tuple[int, int]] = {}
    last_begun = -1
    truncations = 0
    checked_from = 0
    for kill in range(KILLS):
        output = run_and_kill(log_dir, kill_delay(rng), tmp_path / f"stderr-{kill}.txt")
        acked.update(output.acked)
        last_begun = max(last_begun, output.last_begun)
        with StreamLog.open(log_dir, STREAM, config=APPENDER_CONFIG) as log:
            assert log.recovery is not None
            truncations += bool(log.recovery.reason)
            # Recovery only ever touches the active segment: re-read from the segment that
            # was active at the previous check (everything, after the last kill).
            start = 0 if kill == KILLS - 1 else min(checked_from, log.next_offset)
            records = log.read(start, log.next_offset + 1)
            commits = list(log.commits())
            context = f"kill {kill}: {log.recovery}"
            assert offsets_are_dense(log, records, start), context
            assert requests_are_whole_and_in_order(commits, records, start), context
            assert acked_requests_survive(commits, acked), context
            assert nothing_unattempted_appears(commits, last_begun), context
            newest = tag_of(commits[-1].idempotency_key)
            checked_from = log.segments()[-1].base_offset
        # Requests past the newest commit were not acked (or the check above failed).
        acked = {tag: where for tag, where in acked.items() if tag <= newest}
    with StreamLog.open(log_dir, STREAM, config=APPENDER_CONFIG) as log:
        segments = log.segments()
        assert len(segments) > 3, "kills should land around segment rolls too"
        scanned = [
            item for info in segments if info.sealed for item in scan_segment(info.path, STREAM)
        ]
        assert not [item for item in scanned if isinstance(item, CorruptEntry)]
        assert scanned == log.read(0, segments[-1].base_offset)
    print(f"{KILLS} kills, {truncations} torn tails recovered, {len(segments)} segments")
