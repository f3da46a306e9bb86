"""The watermark of one source stream, as the injector sees it.

``max event time seen - out_of_orderness_ms``, never ahead of the oldest
record that is appended but not yet acknowledged by the first computations
(those are unfinished work), and never decreasing. When nothing has been
appended for ``idle_timeout_ms`` the source is idle: event time is assumed to
advance with processing time from the newest record seen, so windows close
without new data.

Records the log refused (a full disk) are not idleness: their clients retry
them. Each refused request holds the watermark at its oldest event time until
it is appended (its idempotency key commits; a request without a key: any
later append) or ``idle_timeout_ms`` passes without it being refused again.

A finished source (a bounded input: :meth:`SourceWatermark.finish`) has no more
records to come: once every record it holds is acknowledged, its watermark is the
end of time, so every window and timer downstream fires.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from millrace.computations import MAX_TIME, MIN_TIME
from millrace.engine import saturate


class SourceWatermark:
    """Thread-safe: appends observe, the watermark loop reads."""

    def __init__(self, *, out_of_orderness_ms: int, idle_timeout_ms: int) -> None:
        self._bound = out_of_orderness_ms
        self._idle = idle_timeout_ms
        self._lock = threading.Lock()
        self._max_seen: int | None = None
        self._last_append_ms: int | None = None
        self._published = MIN_TIME
        self._refused: dict[bytes, tuple[int, int]] = {}  # key -> (oldest event, refused at)
        self._finished = False
        self.idle_advances = 0

    def resume(self, max_event_ms: int | None, published_ms: int, now_ms: int) -> None:
        """Continue where an earlier incarnation stopped: the newest event time in the log
        and the watermark it published. A restart is not an append, but an idle source
        must go on advancing after one: the idle clock resumes from the published
        watermark (the downtime itself does not count as event time)."""
        with self._lock:
            self._published = max(self._published, published_ms)
            if max_event_ms is None:
                return
            self._max_seen = max_event_ms
            idle_already = self._published - (max_event_ms + 1)
            self._last_append_ms = now_ms - (self._idle + idle_already if idle_already > 0 else 0)

    def observe(self, max_event_ms: int, now_ms: int, keys: Iterable[bytes] = ()) -> None:
        """Records up to ``max_event_ms`` were appended at ``now_ms`` by requests with
        idempotency ``keys`` (their refusals, if any, stop holding the watermark)."""
        with self._lock:
            if self._max_seen is None or max_event_ms > self._max_seen:
                self._max_seen = max_event_ms
            self._last_append_ms = now_ms
            self._refused.pop(b"", None)
            for key in keys:
                self._refused.pop(key, None)

    def refused(self, key: bytes, oldest_event_ms: int, now_ms: int) -> None:
        """A request (idempotency ``key``, b"" if none) with records from ``oldest_event_ms``
        on could not be appended at ``now_ms``; its client will retry it."""
        with self._lock:
            held = self._refused.get(key)
            oldest = oldest_event_ms if held is None else min(held[0], oldest_event_ms)
            self._refused[key] = (oldest, now_ms)

    def finish(self) -> None:
        """No record will ever be appended again: the watermark goes to the end of time
        once nothing is unfinished."""
        with self._lock:
            self._finished = True
            self._refused.clear()  # a refused request can no longer come back

    def is_idle(self, oldest_unfinished_ms: int | None, now_ms: int) -> bool:
        """No append for ``idle_timeout_ms`` (or none ever), nothing unfinished and no
        refused request expected back: what a source excluded while idle is then."""
        with self._lock:
            if oldest_unfinished_ms is not None or self._refused_hold(now_ms) is not None:
                return False
            return self._last_append_ms is None or now_ms - self._last_append_ms >= self._idle

    def is_late(self, event_ms: int) -> bool:
        """True when a record is behind the watermark already published."""
        return event_ms < self._published

    def current(self, oldest_unfinished_ms: int | None, now_ms: int) -> int:
        """The watermark now; ``oldest_unfinished_ms``: the oldest appended record not yet
        acknowledged downstream (None if none)."""
        with self._lock:
            refused = self._refused_hold(now_ms)
            if refused is not None and (
                oldest_unfinished_ms is None or refused < oldest_unfinished_ms
            ):
                oldest_unfinished_ms = refused
            if self._finished:
                mark = MAX_TIME if oldest_unfinished_ms is None else oldest_unfinished_ms
                self._published = max(self._published, mark)
                return self._published
            if self._max_seen is None or self._last_append_ms is None:
                return self._published
            # Saturated: a value from before event times were range-checked (an old log,
            # an old journal) must never push a watermark past int64.
            mark = saturate(self._max_seen - self._bound)
            last_activity = max([self._last_append_ms, *(at for _, at in self._refused.values())])
            quiet = now_ms - last_activity - self._idle
            if quiet >= 0:
                idle_mark = saturate(self._max_seen + 1 + quiet)
                if idle_mark > mark:
                    mark = idle_mark
                    self.idle_advances += 1
            if oldest_unfinished_ms is not None and oldest_unfinished_ms < mark:
                mark = oldest_unfinished_ms
            self._published = max(self._published, mark)
            return self._published

    def _refused_hold(self, now_ms: int) -> int | None:
        """The oldest event time of refused requests still expected back (lock held)."""
        expired = [key for key, (_, at) in self._refused.items() if now_ms - at > self._idle]
        for key in expired:
            del self._refused[key]
        return min((oldest for oldest, _ in self._refused.values()), default=None)
