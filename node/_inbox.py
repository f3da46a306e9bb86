"""What an interval worker's inbox holds besides deliveries, and the wait of weak
productions for their acks (both handed in from other threads)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from millrace.delivery import DeliveryWork
from millrace.engine import Production


@dataclass(frozen=True, slots=True)
class Acked:
    """Downstream acknowledged these productions."""

    outbox_keys: list[bytes]


@dataclass(frozen=True, slots=True)
class Refused:
    """Downstream will never take this production."""

    production: Production
    reason: str


@dataclass(frozen=True, slots=True)
class Watermark:
    """A new input low watermark."""

    low_watermark_ms: int


@dataclass(frozen=True, slots=True)
class Fence:
    """The registry confirmed a newer owner."""

    epoch: int
    reason: str


@dataclass(frozen=True, slots=True)
class ForgetRetired:
    """Every receiver took these floors of retired senders (``node/_retired_senders.py``)."""

    floors: Mapping[int, int]


class Stop:
    """Finish the current turn and end the loop."""


STOP = Stop()
InboxItem = DeliveryWork | Acked | Refused | Watermark | Fence | ForgetRetired | Stop


class WeakWait:
    """Productions sent before their commit, and which of them are acked so far."""

    def __init__(self, keys: set[bytes]) -> None:
        self.waiting = keys
        self.acked: set[bytes] = set()
        self._cond = threading.Condition()

    def ack(self, keys: list[bytes]) -> None:
        """These productions were acknowledged."""
        with self._cond:
            for key in keys:
                if key in self.waiting:
                    self.waiting.discard(key)
                    self.acked.add(key)
            if not self.waiting:
                self._cond.notify_all()

    def wait(self, timeout_s: float) -> set[bytes]:
        """Until all are acknowledged or ``timeout_s`` passes; the acknowledged ones."""
        with self._cond:
            self._cond.wait_for(lambda: not self.waiting, timeout_s)
            return set(self.acked)
