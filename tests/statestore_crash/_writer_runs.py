"""Running ``crash_writer.py`` and SIGKILLing it at a chosen instant."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from millrace.statestore import StoreConfig
from tests.support import chaos_kills

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
WRITER = Path(__file__).resolve().with_name("crash_writer.py")

KILLS = chaos_kills(40)
"""Kills of the main test; :data:`MIN_KILLS` is the least that proves anything."""
MIN_KILLS = chaos_kills(30)
MIN_TRANSACTIONS = 100
"""A store with fewer committed transactions at the end proves too little."""
KILL_DELAY_S = (0.020, 0.300)
"""A kill lands this long after the writer's first ``committed`` line (log-uniform)."""
SURVIVAL_SAMPLE = 64
"""Older transactions whose extra keys are re-read after every kill (all at the end)."""
STARTUP_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0
CONFIG = StoreConfig(sync=True)


class WriterOutput:
    """Reads the writer's stdout on a thread and records every transaction it reports."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.begun: list[int] = []
        self.committed: list[int] = []
        self.unexpected: list[str] = []
        self.first_commit = threading.Event()
        self.settled = threading.Event()
        """Set at the first ``committed`` line or at end of file, whichever comes first."""
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            word, _, number = line.partition(" ")
            if word == "begin" and number.isdigit():
                self.begun.append(int(number))
            elif word == "committed" and number.isdigit():
                self.committed.append(int(number))
                self.first_commit.set()
                self.settled.set()
            else:
                self.unexpected.append(line)
        self.settled.set()

    def join(self) -> None:
        """Wait for end of file (the pipe closes when the killed writer is reaped)."""
        self._thread.join(EXIT_TIMEOUT_S)
        assert not self._thread.is_alive(), "the writer's stdout never reached end of file"


@dataclass(frozen=True)
class Kill:
    """What one writer process reported before it was killed."""

    begun: tuple[int, ...]
    committed: tuple[int, ...]

    @property
    def last_committed(self) -> int:
        """The newest transaction the writer saw ``commit()`` return for, or -1."""
        return max(self.committed, default=-1)

    @property
    def last_begun(self) -> int:
        """The newest transaction the writer began to commit, or -1."""
        return max(self.begun, default=-1)


def run_and_kill(store_dir: Path, delay_s: float, stderr_path: Path) -> Kill:
    """Start the writer, SIGKILL it ``delay_s`` after its first commit, reap it."""
    with stderr_path.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(WRITER), str(store_dir)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=REPO_ROOT,
        )
    try:
        assert child.stdout is not None
        output = WriterOutput(child.stdout)
        output.settled.wait(STARTUP_TIMEOUT_S)
        started = output.first_commit.is_set()
        if started:
            time.sleep(delay_s)
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait(EXIT_TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output.join()
    child_stderr = stderr_path.read_text(errors="replace")
    assert returncode == -signal.SIGKILL, (
        f"the writer exited by itself with {returncode}:\n{child_stderr}"
    )
    assert started, f"the writer committed nothing in {STARTUP_TIMEOUT_S} s:\n{child_stderr}"
    assert not output.unexpected, f"unexpected writer output: {output.unexpected[:5]}"
    return Kill(begun=tuple(output.begun), committed=tuple(output.committed))


def kill_delay(rng: random.Random) -> float:
    """A log-uniform delay in :data:`KILL_DELAY_S`: short and long runs alike."""
    low, high = KILL_DELAY_S
    return float(low * (high / low) ** rng.random())
