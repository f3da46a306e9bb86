"""One supervised child: its command, log, readiness and restart bookkeeping."""

from __future__ import annotations

import collections
import os
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from millrace._child_logs import copy_lines
from millrace.deployment import SUPERVISOR_PID_ENV


class ChildState(Enum):
    """Where a child is in its life under the supervisor."""

    IDLE = "idle"  # not started yet, or stopped
    STARTING = "starting"  # spawned, ready line not seen yet
    RUNNING = "running"
    WAITING = "waiting"  # exited; restart scheduled
    FINISHED = "finished"  # exited with 0 by itself once running (a drained node): done


@dataclass
class SupervisedChild:
    """A child's command and log, its current process, and its restart bookkeeping
    (guarded by the supervisor's lock)."""

    name: str
    argv: list[str]
    log_path: Path
    ready_prefix: str
    tier: int
    state: ChildState = ChildState.IDLE
    supervised: bool = False
    process: subprocess.Popen[bytes] | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    ready_line: str | None = None
    spawned_at: float = 0.0
    ready_deadline: float = 0.0
    next_start: float = 0.0
    backoff_s: float = 0.0
    restarts: int = 0
    recent: collections.deque[float] = field(default_factory=collections.deque)
    last_exit: str = ""
    last_delay_s: float = 0.0
    crash_loop: str = ""

    def spawn(
        self, *, env: Mapping[str, str] | None, cwd: str | Path | None, ready_timeout_s: float
    ) -> subprocess.Popen[bytes]:
        """Start a new incarnation: stderr to the log file, in its own session; a thread
        reads the ready line, then copies the rest of stdout to the log file."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.ready = threading.Event()
        self.ready_line = None
        child_env = dict(os.environ if env is None else env)
        child_env[SUPERVISOR_PID_ENV] = str(os.getpid())  # the child stops when we are gone
        with open(self.log_path, "ab") as stderr:
            process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=child_env,
                cwd=cwd,
                start_new_session=True,
            )
        self.process = process
        self.state = ChildState.STARTING
        self.spawned_at = time.monotonic()
        self.ready_deadline = self.spawned_at + ready_timeout_s
        threading.Thread(
            target=self._pump,
            args=(process, self.ready),
            name=f"millrace-supervisor-{self.name}",
            daemon=True,
        ).start()
        return process

    def _pump(self, process: subprocess.Popen[bytes], ready: threading.Event) -> None:
        """Read the ready line, then copy the rest of stdout to the log file."""
        stdout = process.stdout
        assert stdout is not None
        try:
            first = stdout.readline()
            if first:
                self.ready_line = first.decode("utf-8", "replace").rstrip("\r\n")
            ready.set()
            if not first:
                return
            with open(self.log_path, "ab", buffering=0) as sink:
                copy_lines(stdout, sink)
        finally:
            ready.set()
            stdout.close()
