"""``LoadTable``: what the nodes report of their intervals' work, as rates.

Each node reports about once a second (``Control.ReportLoad``): its computation and,
per interval it runs, the records committed and the CPU seconds its worker thread used
since the interval opened there (counters that only grow while it runs there at one
epoch).
The table turns consecutive reports into smoothed rates; an interval that moves or
restarts starts its counters again, and its rate carries over until the new owner's
second report (the keys it holds are the same, so is its load).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from millrace.computations import IntervalId

LIVE_S = 5.0
"""A node that reported within this many seconds is live."""
SMOOTHING = 0.5
"""Weight of the newest measurement in a rate (exponential smoothing)."""


@dataclass(frozen=True, slots=True)
class IntervalSample:
    """One interval's counters in one report."""

    index: int
    epoch: int
    records_committed: int
    cpu_seconds: float


@dataclass(slots=True)
class _Rate:
    node_id: str
    epoch: int
    records: int
    cpu: float
    at: float
    records_per_s: float = 0.0
    cpu_share: float = 0.0


class LoadTable:
    """Thread-safe: reports arrive on gRPC threads, the rebalancer reads on its own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, float]] = {}
        """node id -> (its computation, when it last reported)."""
        self._rates: dict[IntervalId, _Rate] = {}

    def report(self, node_id: str, computation: str, samples: Iterable[IntervalSample]) -> None:
        """Take one node's report."""
        now = self._clock()
        with self._lock:
            self._seen[node_id] = (computation, now)
            for sample in samples:
                self._take(node_id, computation, sample, now)

    def _take(self, node_id: str, computation: str, sample: IntervalSample, now: float) -> None:
        key = IntervalId(computation, sample.index)
        rate = self._rates.get(key)
        if rate is None:
            self._rates[key] = _Rate(
                node_id, sample.epoch, sample.records_committed, sample.cpu_seconds, now
            )
            return
        same_run = rate.node_id == node_id and rate.epoch == sample.epoch
        elapsed = now - rate.at
        if same_run and sample.records_committed >= rate.records and elapsed > 0:
            measured = (sample.records_committed - rate.records) / elapsed
            cpu = max(0.0, (sample.cpu_seconds - rate.cpu) / elapsed)
            rate.records_per_s += SMOOTHING * (measured - rate.records_per_s)
            rate.cpu_share += SMOOTHING * (cpu - rate.cpu_share)
        elif same_run and elapsed <= 0:
            return
        # The next measurement starts here (on another run -- moved, restarted -- the
        # counters start again and the rate so far carries over).
        rate.node_id, rate.epoch = node_id, sample.epoch
        rate.records, rate.cpu, rate.at = sample.records_committed, sample.cpu_seconds, now

    def live_nodes(self, computation: str) -> set[str]:
        """The nodes of ``computation`` that reported within :data:`LIVE_S`."""
        now = self._clock()
        with self._lock:
            return {
                node_id
                for node_id, (of, at) in self._seen.items()
                if of == computation and now - at < LIVE_S
            }

    def is_live(self, node_id: str) -> bool:
        """True when ``node_id`` reported within :data:`LIVE_S`."""
        now = self._clock()
        with self._lock:
            seen = self._seen.get(node_id)
            return seen is not None and now - seen[1] < LIVE_S

    def rates(self, computation: str) -> dict[int, float]:
        """Interval index -> records committed per second (smoothed), as reported."""
        with self._lock:
            return {i: r.records_per_s for (c, i), r in self._rates.items() if c == computation}

    def cpu(self, computation: str) -> dict[int, float]:
        """Interval index -> CPU seconds its worker uses per second (smoothed)."""
        with self._lock:
            return {i: r.cpu_share for (c, i), r in self._rates.items() if c == computation}
