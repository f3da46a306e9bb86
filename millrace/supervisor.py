"""Run child processes, wait for their ready lines, restart them when they die.

A :class:`Supervisor` owns a set of named children. :meth:`Supervisor.start`
starts them in the order they were added, each only once the previous one
printed its ready line (the first line on its stdout). A watcher thread then
restarts any child that exits, with exponential backoff, but one that ran and exited
with 0 by itself (a drained node: its work is done). :meth:`Supervisor.stop`
stops supervising and terminates the children tier by tier: every child of
the highest tier gets SIGTERM together, the supervisor waits for them (SIGKILL
after ``stop_timeout_s``), then the next tier down, and so on.

Each child's stderr and its stdout after the ready line are appended to its
log file, together with one marker line per start and exit written by the
supervisor. Children run in their own session, so a Ctrl-C in a terminal
reaches only the supervising process, which then stops them in order.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from millrace._child_logs import describe_exit, tail_lines
from millrace._supervised_child import ChildState, SupervisedChild

log = logging.getLogger(__name__)


class SupervisorError(RuntimeError):
    """Base class of the supervisor's errors."""


class ChildStartError(SupervisorError):
    """A child did not print its ready line (it exited, timed out or printed something else)."""

    def __init__(self, name: str, log_path: Path, reason: str, tail: Sequence[str] = ()) -> None:
        self.name = name
        self.log_path = log_path
        self.reason = reason
        self.tail = list(tail)
        message = f"{name} did not start: {reason} (log: {log_path})"
        if self.tail:
            message += "\nlast lines of its log:\n" + "\n".join(f"  | {t}" for t in self.tail)
        super().__init__(message)


class StartInterruptedError(SupervisorError):
    """:meth:`Supervisor.request_stop` was called while :meth:`Supervisor.start` was waiting."""


class Supervisor:
    """Starts named child processes in order and keeps them running until :meth:`stop`.

    Restarts use exponential backoff: ``min_backoff_s`` doubling up to
    ``max_backoff_s``, reset when the child had stayed up ``stable_after_s``.
    A child restarted more than ``burst_limit`` times within ``burst_window_s``
    is still restarted, but always after ``max_backoff_s``. A restarted child
    that prints no ready line within ``ready_timeout_s`` is killed (and restarted).
    """

    def __init__(
        self,
        *,
        ready_timeout_s: float = 60.0,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        stable_after_s: float = 30.0,
        burst_limit: int = 10,
        burst_window_s: float = 60.0,
        stop_timeout_s: float = 20.0,
        poll_interval_s: float = 0.1,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.ready_timeout_s = ready_timeout_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_after_s = stable_after_s
        self.burst_limit = burst_limit
        self.burst_window_s = burst_window_s
        self.stop_timeout_s = stop_timeout_s
        self.poll_interval_s = poll_interval_s
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._children: dict[str, SupervisedChild] = {}
        self._lock = threading.RLock()
        # A plain flag, not an Event: it is set from signal handlers, which must not take locks.
        self._stop_requested = False
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    # -- configuration --------------------------------------------------------------

    def add(
        self,
        name: str,
        argv: Sequence[str],
        log_path: str | Path,
        *,
        ready_prefix: str = "",
        tier: int = 0,
    ) -> None:
        """Register a child; :meth:`start` starts children in the order they were added.

        ``ready_prefix``: the child's first stdout line must start with it.
        ``tier``: :meth:`stop` stops higher tiers first (and a tier's children together).
        """
        with self._lock:
            if name in self._children:
                raise ValueError(f"a child named {name!r} was already added")
            if self._watcher is not None:
                raise RuntimeError("children cannot be added after start()")
            self._children[name] = SupervisedChild(
                name=name,
                argv=list(argv),
                log_path=Path(log_path),
                ready_prefix=ready_prefix,
                tier=tier,
                backoff_s=self.min_backoff_s,
            )

    # -- observation ----------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """The children, in start order."""
        with self._lock:
            return list(self._children)

    @property
    def restarts(self) -> dict[str, int]:
        """How many times each child was restarted (a copy)."""
        with self._lock:
            return {name: child.restarts for name, child in self._children.items()}

    def pid(self, name: str) -> int | None:
        """The current process id of ``name`` (None while it is down)."""
        with self._lock:
            child = self._children[name]
            if child.process is None or child.state in (
                ChildState.IDLE,
                ChildState.WAITING,
                ChildState.FINISHED,
            ):
                return None
            return child.process.pid

    def ready_line(self, name: str) -> str | None:
        """The ready line of the current (or last) incarnation of ``name``."""
        with self._lock:
            return self._children[name].ready_line

    def is_running(self, name: str) -> bool:
        """Whether ``name`` is up and has printed its ready line."""
        with self._lock:
            return self._children[name].state is ChildState.RUNNING

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Start every child in order, each after the previous one is ready; then supervise.

        Raises :class:`ChildStartError` if a child does not become ready within
        ``ready_timeout_s`` and :class:`StartInterruptedError` if :meth:`request_stop`
        is called meanwhile; either way the children already started are stopped.
        """
        with self._lock:
            if self._watcher is not None:
                raise RuntimeError("start() was already called")
            children = list(self._children.values())
            # Supervises each child from its ready line on (so an early child that dies
            # while a later one starts is restarted).
            self._watcher = threading.Thread(
                target=self._watch, name="millrace-supervisor", daemon=True
            )
            self._watcher.start()
        try:
            for child in children:
                self._start_and_wait(child)
        except BaseException:
            self.stop()
            raise

    def request_stop(self) -> None:
        """Ask a :meth:`start` in progress to give up; takes no lock, so signal handlers may."""
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` or :meth:`stop` was called."""
        return self._stop_requested

    def stop(self) -> None:
        """Stop supervising, then SIGTERM the children, highest tier first; idempotent.

        Each tier gets ``stop_timeout_s`` to exit; what is left is SIGKILLed.
        """
        self._stop_requested = True
        self._stopping.set()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join()
        with self._lock:
            tiers = sorted({child.tier for child in self._children.values()}, reverse=True)
        for tier in tiers:
            with self._lock:
                group = [c for c in self._children.values() if c.tier == tier]
            self._stop_group(group)

    def _stop_group(self, group: list[SupervisedChild]) -> None:
        live: list[tuple[SupervisedChild, subprocess.Popen[bytes]]] = []
        with self._lock:
            for child in group:
                if child.process is not None and child.process.poll() is None:
                    live.append((child, child.process))
                child.state = ChildState.IDLE
        for child, process in live:
            log.info("stopping %s (pid %d)", child.name, process.pid)
            process.terminate()
        deadline = time.monotonic() + self.stop_timeout_s
        for child, process in live:
            try:
                code = process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning(
                    "%s (pid %d) did not stop within %g s: SIGKILL",
                    child.name,
                    process.pid,
                    self.stop_timeout_s,
                )
                process.kill()
                code = process.wait()
            self._mark(child, f"stopped ({describe_exit(code)})")

    # -- internals ------------------------------------------------------------------

    def _start_and_wait(self, child: SupervisedChild) -> None:
        if self._stop_requested:
            raise StartInterruptedError(f"stop requested before {child.name} was started")
        try:
            with self._lock:
                self._spawn(child)
        except OSError as error:
            raise ChildStartError(child.name, child.log_path, f"cannot run it: {error}") from error
        assert child.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while not child.ready.wait(min(self.poll_interval_s, self.ready_timeout_s)):
            if self._stop_requested:
                raise StartInterruptedError(f"stop requested while starting {child.name}")
            if time.monotonic() >= deadline:
                child.process.kill()
                child.process.wait()
                raise ChildStartError(
                    child.name,
                    child.log_path,
                    f"no ready line within {self.ready_timeout_s:g} s",
                    tail_lines(child.log_path),
                )
        line = child.ready_line
        if line is None or not line.startswith(child.ready_prefix):
            try:  # no line at all: stdout closed, the process is (about to be) gone
                code = child.process.wait(2.0 if line is None else 0.0)
                reason = f"it exited with {describe_exit(code)} before its ready line"
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
                if line is None:
                    reason = "it closed its stdout without a ready line"
                else:
                    reason = f"its first line was {line!r}, expected {child.ready_prefix!r}..."
            raise ChildStartError(child.name, child.log_path, reason, tail_lines(child.log_path))
        with self._lock:
            child.state = ChildState.RUNNING
            child.supervised = True
        log.info("%s ready (pid %d): %s", child.name, child.process.pid, line)

    def _spawn(self, child: SupervisedChild) -> None:
        """Start one incarnation of ``child`` (lock held)."""
        process = child.spawn(env=self._env, cwd=self._cwd, ready_timeout_s=self.ready_timeout_s)
        command = shlex.join(child.argv).replace("\n", "\\n")
        self._mark(child, f"started (pid {process.pid}): {command}")

    def _watch(self) -> None:
        while not self._stopping.wait(self.poll_interval_s):
            with self._lock:
                if self._stopping.is_set():
                    return
                for child in self._children.values():
                    try:
                        self._check(child, time.monotonic())
                    except Exception:  # keep supervising the others; retry this one later
                        log.exception("supervising %s failed; retrying", child.name)

    def _check(self, child: SupervisedChild, now: float) -> None:
        """One supervision step for one child (lock held)."""
        if not child.supervised:
            return  # start() is still waiting for its first ready line
        process = child.process
        if child.state in (ChildState.STARTING, ChildState.RUNNING) and process is not None:
            code = process.poll()
            if code is not None:
                self._exited(child, code, now)
            elif child.state is ChildState.STARTING and child.ready.is_set():
                line = child.ready_line
                if line is not None and line.startswith(child.ready_prefix):
                    child.state = ChildState.RUNNING
                    log.debug("%s ready again (pid %d)", child.name, process.pid)
                else:
                    log.warning(
                        "%s printed %r instead of its ready line: SIGKILL", child.name, line
                    )
                    process.kill()
            elif child.state is ChildState.STARTING and now >= child.ready_deadline:
                log.warning(
                    "%s (pid %d) not ready within %g s: SIGKILL",
                    child.name,
                    process.pid,
                    self.ready_timeout_s,
                )
                process.kill()
        elif child.state is ChildState.WAITING and now >= child.next_start:
            child.restarts += 1
            try:
                self._spawn(child)
            except OSError as error:
                child.next_start = now + self.max_backoff_s
                log.error("cannot restart %s: %s; retrying in %g s", child.name, error,
                          self.max_backoff_s)  # fmt: skip
                return
            assert child.process is not None
            log.warning(
                "restarted %s (pid %d) after %s; restart #%d, backoff %.1f s%s",
                child.name,
                child.process.pid,
                child.last_exit,
                child.restarts,
                child.last_delay_s,
                child.crash_loop,
            )

    def _exited(self, child: SupervisedChild, code: int, now: float) -> None:
        """Schedule the restart of a child that exited on its own (lock held); one
        that ran and exited with 0 (a drained node) finished its work: not restarted."""
        child.last_exit = describe_exit(code)
        line = child.ready_line if child.ready.is_set() else None  # of this incarnation
        if code == 0 and line is not None and line.startswith(child.ready_prefix):
            self._mark(child, "finished (exit 0): not restarted")
            log.info("%s finished (exit 0): not restarted", child.name)
            child.state = ChildState.FINISHED
            return
        self._mark(child, f"exited ({child.last_exit})")
        if now - child.spawned_at >= self.stable_after_s:
            child.backoff_s = self.min_backoff_s
        delay = child.backoff_s
        child.backoff_s = min(child.backoff_s * 2, self.max_backoff_s)
        while child.recent and child.recent[0] <= now - self.burst_window_s:
            child.recent.popleft()
        child.recent.append(now)
        child.crash_loop = ""
        if len(child.recent) > self.burst_limit:
            delay = self.max_backoff_s
            window = f"{self.burst_window_s:g} s"
            child.crash_loop = f" (crash loop: {len(child.recent)} exits in {window})"
        child.last_delay_s = delay
        child.next_start = now + delay
        child.state = ChildState.WAITING

    def _mark(self, child: SupervisedChild, event: str) -> None:
        """Append a marker line to the child's log."""
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        try:
            with open(child.log_path, "a", encoding="utf-8") as handle:
                handle.write(f"--- {stamp} supervisor: {child.name} {event}\n")
        except OSError as error:
            log.warning("cannot write to %s: %s", child.log_path, error)
