"""Killing and restarting a test's processes at random moments, in a thread."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from typing import Protocol


class Restartable(Protocol):
    """A test's child process: ``InjectorProcess``, ``NodeProcess``."""

    def kill(self) -> None: ...

    def start(self) -> None: ...


class RandomKills:
    """SIGKILLs a random one of ``processes`` every ``pause`` seconds (uniform) and starts
    it again, until ``minimum`` kills are done or :meth:`stop` is called. A context
    manager: started on entry, stopped (the thread joined) on exit."""

    def __init__(
        self,
        processes: Mapping[str, Restartable],
        rng: random.Random,
        minimum: int,
        *,
        pause: tuple[float, float] = (0.3, 1.0),
    ) -> None:
        self._processes = dict(processes)
        self._rng = rng
        self._minimum = minimum
        self._pause = pause
        self._stopping = threading.Event()
        self.kills = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stopping.is_set() and self.kills < self._minimum:
            time.sleep(self._rng.uniform(*self._pause))
            victim = self._processes[self._rng.choice(sorted(self._processes))]
            victim.kill()
            self.kills += 1
            victim.start()

    def start(self) -> None:
        """Start killing."""
        self._thread.start()

    def __enter__(self) -> RandomKills:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def finish(self, timeout: float = 120) -> None:
        """Wait until the minimum number of kills is done."""
        self._thread.join(timeout)

    def stop(self) -> None:
        """Stop killing (after the current restart)."""
        self._stopping.set()
        self._thread.join(60)
