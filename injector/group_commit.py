"""``GroupCommitter``: many clients' appends to one stream log, one fsync per group.

Clients call :meth:`GroupCommitter.submit` from gRPC threads and block on the
returned future. One writer thread takes everything queued, appends it with
a single ``StreamLog.append`` (one write, one fsync) and completes the
futures: a client is acknowledged only once its records are durable.

Idempotency: a request with a non-empty key that was committed before (the
key is in the log's COMMIT marker, rebuilt from the log on open) is answered
with the original result and appends nothing; a retry that races its own
first attempt waits for that attempt's result. A retry must carry the same
records: one with other records under a used key is refused
(:class:`IdempotencyKeyReusedError`), never acknowledged and dropped.

Isolation: a request the log cannot encode fails alone; the others of its
group are written.

Finishing (a bounded input): :meth:`GroupCommitter.finish` refuses every new
request from then on (:class:`StreamFinishedError`) but still answers replays of
requests committed or being committed, and returns once everything queued before
it is committed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from millrace.injector.log import (
    AppendRequest,
    AppendResult,
    LogClosedError,
    LogWriteError,
    OffsetDeletedError,
    StreamLog,
)

log = logging.getLogger(__name__)


class IdempotencyKeyReusedError(Exception):
    """A request reuses an idempotency key for records other than the ones committed (or
    being committed) under it. Nothing of it is written: use a new key for new records."""

    def __init__(self, key: bytes, where: str) -> None:
        super().__init__(
            f"idempotency key {key.decode(errors='replace')!r} was already used for other "
            f"records ({where}); a retry must carry exactly the same records, new records "
            "need a new key"
        )
        self.key = key


class StreamFinishedError(Exception):
    """The stream was finished: it takes no new records (replays are still answered)."""

    def __init__(self, stream: str, end_offset: int) -> None:
        super().__init__(
            f"stream {stream!r} is finished (its records end before offset {end_offset}): "
            "it takes no more records; retries of requests it already took are answered"
        )
        self.stream = stream
        self.end_offset = end_offset


@dataclass(frozen=True, slots=True)
class Acked:
    """What a client learns: where its records are, and whether this was a replay."""

    first_offset: int
    count: int
    replayed: bool


class GroupCommitter:
    """The single writer of one :class:`StreamLog`."""

    def __init__(
        self,
        stream_log: StreamLog,
        *,
        max_group_records: int = 50_000,
        remembered_keys: int = 1_000_000,
        on_commit: Callable[[list[AppendResult], list[AppendRequest]], None] | None = None,
        on_refused: Callable[[list[AppendRequest]], None] | None = None,
        on_append_seconds: Callable[[float], None] | None = None,
    ) -> None:
        self.log = stream_log
        self._max_group_records = max_group_records
        self._remembered = remembered_keys
        self._on_commit = on_commit
        self._on_refused = on_refused
        self._on_append_seconds = on_append_seconds
        self._cond = threading.Condition()
        self._queue: list[tuple[AppendRequest, Future[Acked]]] = []
        self._inflight: dict[bytes, tuple[Future[Acked], AppendRequest]] = {}
        self._done: OrderedDict[bytes, Acked] = OrderedDict()
        self._stopping = False
        self._finished = False
        self._committing = False
        for commit in stream_log.commits():
            if commit.idempotency_key:
                self._remember(
                    commit.idempotency_key, Acked(commit.first_offset, commit.count, True)
                )
        self._thread = threading.Thread(
            target=self._run, name=f"group-commit-{stream_log.stream}", daemon=True
        )

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def stop(self) -> None:
        """Finish what is queued, then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()

    def submit(self, request: AppendRequest) -> Future[Acked]:
        """Queue an append; the future completes once it is durable (or was already)."""
        future: Future[Acked] = Future()
        key = request.idempotency_key
        with self._cond:
            if self._stopping:
                future.set_exception(
                    LogClosedError(
                        str(self.log.directory), "closing: the injector is shutting down"
                    )
                )
                return future
            done = self._done.get(key) if key else None
            running = self._inflight.get(key) if key and done is None else None
            if done is None and running is None and self._finished:
                future.set_exception(StreamFinishedError(self.log.stream, self.log.next_offset))
                return future
            if done is None and running is None:
                if key:
                    self._inflight[key] = (future, request)
                self._queue.append((request, future))
                self._cond.notify_all()
                return future
        if running is not None:
            first_future, first_request = running
            if first_request.records != request.records:
                future.set_exception(
                    IdempotencyKeyReusedError(key, "a request still being written")
                )
                return future
            return _as_replay(first_future)
        assert done is not None
        if self._same_records(done, request):
            future.set_result(Acked(done.first_offset, done.count, True))
        else:
            end = done.first_offset + done.count - 1
            where = f"offsets {done.first_offset}..{end}" if done.count else "an empty request"
            future.set_exception(IdempotencyKeyReusedError(key, where))
        return future

    def finish(self) -> int:
        """Take no new request from now on; wait until every request queued before is
        written (or refused); return the offset the stream's records end before."""
        with self._cond:
            self._finished = True
            while self._queue or self._committing:
                self._cond.wait()
        return self.log.next_offset

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` was called."""
        return self._finished

    def _same_records(self, done: Acked, request: AppendRequest) -> bool:
        """Whether ``request`` carries the records committed at ``done`` (read back from the
        log: retries are rare). Records retention deleted cannot be compared: a replay."""
        if done.count != len(request.records):
            return False
        try:
            logged = self.log.read(done.first_offset, done.count)
        except OffsetDeletedError:
            return True
        return [(r.key, r.value, r.event_time_ms) for r in logged] == request.records.records()

    def _remember(self, key: bytes, acked: Acked) -> None:
        self._done[key] = acked
        if len(self._done) > self._remembered:
            self._done.popitem(last=False)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue and self._stopping:
                    return
                group: list[tuple[AppendRequest, Future[Acked]]] = []
                total = 0
                while self._queue and (not group or total < self._max_group_records):
                    item = self._queue.pop(0)
                    group.append(item)
                    total += len(item[0].records)
                self._committing = True
            try:
                self._commit(group)
            finally:
                with self._cond:
                    self._committing = False
                    self._cond.notify_all()

    def _commit(self, group: list[tuple[AppendRequest, Future[Acked]]]) -> None:
        """Append the group; complete its futures. A failed append fails the requests it
        did not write (a write error may come after earlier chunks were written: those
        requests are durable and are acknowledged, their keys remembered)."""
        try:
            started = time.perf_counter()
            results = self.log.append([request for request, _ in group])
            if self._on_append_seconds is not None:
                self._on_append_seconds(time.perf_counter() - started)
        except (ValueError, TypeError) as exc:
            # A request the log cannot encode: planning failed, nothing was written. Write
            # the others alone so that it fails by itself.
            if len(group) > 1:
                for item in group:
                    self._commit([item])
                return
            self._fail(group, exc)
            return
        except BaseException as exc:
            published = exc.published if isinstance(exc, LogWriteError) else []
            log.error("append to %s failed: %s", self.log.stream, exc)
            self._succeed(group[: len(published)], published)
            refused = group[len(published) :]
            self._fail(refused, exc)
            if self._on_refused is not None:
                self._on_refused([request for request, _ in refused])
            return
        self._succeed(group, results)

    def _fail(self, group: list[tuple[AppendRequest, Future[Acked]]], exc: BaseException) -> None:
        with self._cond:
            for request, future in group:
                self._inflight.pop(request.idempotency_key, None)
                future.set_exception(exc)

    def _succeed(
        self, group: list[tuple[AppendRequest, Future[Acked]]], results: list[AppendResult]
    ) -> None:
        if not group:
            return
        with self._cond:
            for (request, future), result in zip(group, results, strict=True):
                acked = Acked(result.first_offset, result.count, False)
                if request.idempotency_key:
                    self._inflight.pop(request.idempotency_key, None)
                    self._remember(request.idempotency_key, acked)
                future.set_result(acked)
        if self._on_commit is not None:
            self._on_commit(results, [request for request, _ in group])


def _as_replay(original: Future[Acked]) -> Future[Acked]:
    """A future that completes like ``original`` but says ``replayed``."""
    replay: Future[Acked] = Future()

    def relay(done: Future[Acked]) -> None:
        error = done.exception()
        if error is not None:
            replay.set_exception(error)
        else:
            result = done.result()
            replay.set_result(Acked(result.first_offset, result.count, True))

    original.add_done_callback(relay)
    return replay
