"""``ManualClock``: milliseconds a test moves by hand; pass it wherever a clock is taken."""

from __future__ import annotations


class ManualClock:
    """A clock tests move by hand (milliseconds)."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> None:
        """Move the clock forward by ``delta_ms``."""
        self.now_ms += delta_ms
