"""``IngestStream``: one source stream of the injector: its log, writer, forwarder and
source watermark, and the hold of what it appended but nobody has acknowledged yet.

A stream can be finished (a bounded input): :meth:`IngestStream.finish` writes
``finished.json`` durably in the stream's log directory once every append before
it is committed; from then on, also after a restart, the stream takes no new
records and its watermark goes to the end of time once all of them are
acknowledged."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from millrace.computations import MIN_TIME, Topology
from millrace.deployment import write_json_durably
from millrace.injector.forwarder import STATE_FILE, Forwarder, Submitter
from millrace.injector.group_commit import Acked, GroupCommitter
from millrace.injector.injector_metrics import InjectorMetrics
from millrace.injector.log import AppendRequest, AppendResult, StreamLog
from millrace.injector.source_watermark import SourceWatermark

FINISHED_FILE = "finished.json"
"""In a stream's log directory: the stream is finished, its records end before
``end_offset``."""


class IngestStream:
    """One source stream: its log, writer, forwarder and watermark."""

    def __init__(
        self,
        stream_log: StreamLog,
        *,
        topology: Topology,
        sender: Callable[[str, int], Submitter],
        metrics: InjectorMetrics,
        out_of_orderness_ms: int,
        idle_timeout_ms: int,
        published_ms: int,
        clock: Callable[[], int],
        elapsed_clock: Callable[[], int] | None = None,
    ) -> None:
        """``clock``: the wall clock, for timestamps; ``elapsed_clock`` (default
        ``clock``): what idleness is measured on, in ms (the injector passes a monotonic
        clock: a wall clock stepped forward must not make a busy source look idle)."""
        self.name = stream_log.stream
        self.log = stream_log
        self._clock = clock
        self._elapsed = clock if elapsed_clock is None else elapsed_clock
        self._metrics = metrics
        self.watermark = SourceWatermark(
            out_of_orderness_ms=out_of_orderness_ms, idle_timeout_ms=idle_timeout_ms
        )
        self._unforwarded: deque[tuple[int, int]] = deque()  # (end offset, min event time)
        self._lock = threading.Lock()
        self.committer = GroupCommitter(
            stream_log,
            on_commit=self._committed,
            on_refused=self._refused,
            on_append_seconds=metrics.append_seconds.labels(self.name).observe,
        )
        self.forwarder = Forwarder(stream_log, topology, sender, stream_log.directory / STATE_FILE)
        # Records the previous incarnation appended but that were not acknowledged are
        # unknown work until the forwarder has re-read them: hold the watermark till then.
        self._hold_until_offset = stream_log.next_offset
        newest = max(
            (s.max_event_ms for s in stream_log.segments() if s.max_event_ms is not None),
            default=None,
        )
        self.watermark.resume(newest, published_ms, self._elapsed())
        self.finished_at: int | None = finished_offset(stream_log.directory)
        """The offset the stream's records end before, once it is finished."""
        if self.finished_at is not None:
            self.committer.finish()
            self.watermark.finish()

    def submit(self, request: AppendRequest) -> Future[Acked]:
        """Append (group-committed; idempotent replays append nothing)."""
        return self.committer.submit(request)

    def finish(self) -> int:
        """Finish the stream (idempotent): no new record from now on; returns the offset
        its records end before. Appends acknowledged before are all in the log."""
        end = self.committer.finish()
        if self.finished_at is None:
            write_json_durably(
                self.log.directory / FINISHED_FILE,
                {"stream": self.name, "end_offset": end, "finished_at_ms": self._clock()},
            )
            self.finished_at = end
        self.watermark.finish()
        return self.finished_at

    def _committed(self, results: list[AppendResult], requests: list[AppendRequest]) -> None:
        """After each group commit (pushed and file-source records alike): count late
        records, track the unforwarded ones, observe the newest event time."""
        now = self._elapsed()
        newest: int | None = None
        late = 0
        with self._lock:
            for result, request in zip(results, requests, strict=True):
                if not result.count:
                    continue
                oldest = result.min_event_ms
                if self.watermark.is_late(oldest):  # else none is: no look at each record
                    late += sum(1 for _, _, ts in request.records if self.watermark.is_late(ts))
                if newest is None or result.max_event_ms > newest:
                    newest = result.max_event_ms
                end = result.first_offset + result.count
                while self._unforwarded and self._unforwarded[-1][1] >= oldest:
                    self._unforwarded.pop()  # never the minimum again while this one waits
                self._unforwarded.append((end, oldest))
            # Under the same lock as the tick: it never sees the new maximum without the
            # hold of the records that carried it.
            if newest is not None:
                self.watermark.observe(newest, now, [r.idempotency_key for r in requests])
        if late:
            self._metrics.late_records.labels(self.name).inc(late)
        self._metrics.ingested.labels(self.name).inc(sum(r.count for r in results))
        self.forwarder.appended()

    def _refused(self, requests: list[AppendRequest]) -> None:
        """The log could not write these requests: their clients retry them, so the
        watermark must not pass them meanwhile (nor count the outage as idleness)."""
        now = self._elapsed()
        for request in requests:
            if request.records:
                oldest, _ = request.records.time_range()
                self.watermark.refused(request.idempotency_key, oldest, now)
        self._metrics.refused.labels(self.name).inc(sum(len(r.records) for r in requests))

    def source_watermark(self, now_ms: int) -> int:
        """This source's watermark now (the tick publishes it); ``now_ms`` on the elapsed
        clock."""
        with self._lock:
            return self.watermark.current(self._oldest_unfinished_locked(), now_ms)

    def is_idle(self, now_ms: int) -> bool:
        """Nothing appended for the idle timeout and nothing unacknowledged (``now_ms`` on
        the elapsed clock)."""
        with self._lock:
            return self.watermark.is_idle(self._oldest_unfinished_locked(), now_ms)

    def oldest_unfinished_ms(self, consumer: str | None = None) -> int | None:
        """Oldest event time appended but not yet acknowledged by the first computation
        ``consumer`` (None: by every first computation)."""
        with self._lock:
            return self._oldest_unfinished_locked(consumer)

    def _oldest_unfinished_locked(self, consumer: str | None = None) -> int | None:
        forwarded = self.forwarder.forwarded_offset
        if forwarded < self._hold_until_offset:
            return MIN_TIME
        # A monotonic queue: appends at the right, forwarded entries leave at the
        # left, and the left end always holds the minimum of what remains.
        while self._unforwarded and self._unforwarded[0][0] <= forwarded:
            self._unforwarded.popleft()
        waiting = self._unforwarded[0][1] if self._unforwarded else None
        in_flight = self.forwarder.oldest_unfinished_ms(consumer)
        candidates = [t for t in (waiting, in_flight) if t is not None]
        return min(candidates) if candidates else None


def finished_offset(directory: Path) -> int | None:
    """The offset a finished stream's records end before (None: not finished)."""
    try:
        body = json.loads((directory / FINISHED_FILE).read_text())
    except FileNotFoundError:
        return None
    return int(body["end_offset"])
