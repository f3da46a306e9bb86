"""``ManualClock``: milliseconds a test moves by hand; pass it wherever a clock is taken.
:func:`faketime_library`: libfaketime, to give a child process a wall clock of its own."""

from __future__ import annotations

import glob

import pytest


class ManualClock:
    """A clock tests move by hand (milliseconds)."""

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, delta_ms: int) -> None:
        """Move the clock forward by ``delta_ms``."""
        self.now_ms += delta_ms


def faketime_library() -> str:
    """Debian's libfaketimeMT (for a child's ``LD_PRELOAD``); skips the test without it."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        pytest.skip("libfaketime is not installed (make test installs Debian's faketime)")
    return found[0]
