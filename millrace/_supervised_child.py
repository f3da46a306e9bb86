"""One supervised child: its command, log, readiness and restart bookkeeping."""

from __future__ import annotations

import collections
import subprocess
import threading
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path


class ChildState(Enum):
    """Where a child is in its life under the supervisor."""

    IDLE = "idle"  # not started yet, or stopped
    STARTING = "starting"  # spawned, ready line not seen yet
    RUNNING = "running"
    WAITING = "waiting"  # exited; restart scheduled


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
