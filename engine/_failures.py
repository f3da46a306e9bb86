"""``FailureBook``: what an interval remembers about user code that raised.

Two things, both in memory only (a restart resets them, and every unacked
record is resent anyway):

* attempts per record id (or timer identity), so a record or timer is
  dead-lettered after ``max_attempts`` instead of being retried forever;
* which keys are *held*: while a key's failed record (or timer) waits for its
  retry, the later records of that key are left unacked and its later timers
  stay pending, so the key's work is still done in order. A hold lapses after
  ``HOLD_TIMEOUT_MS`` in case a failed record never comes back (a failed
  timer stays in the store and is retried every turn).
"""

from __future__ import annotations

from collections.abc import Iterable

HOLD_TIMEOUT_MS = 60_000
"""How long a key waits for its failed record's retry before later work goes ahead."""


class FailureBook:
    """Attempts per failed record or timer, and the keys their failures hold."""

    def __init__(self, max_attempts: int) -> None:
        self.max_attempts = max_attempts
        self._attempts: dict[bytes, int] = {}
        self.held: dict[bytes, tuple[bytes, int]] = {}
        """Key -> (ident of the failed record or timer it waits for, until when in ms).
        Read it to skip the calls below on the usual path (nothing held); change it
        through them."""

    def held_by_another(self, key: bytes, ident: bytes, now_ms: int) -> bool:
        """True when ``key`` waits for the retry of a record or timer other than ``ident``."""
        held = self.held.get(key)
        if held is None or held[0] == ident:
            return False
        if now_ms > held[1]:
            del self.held[key]
            return False
        return True

    def failed(self, ident: bytes, key: bytes | None, now_ms: int) -> int | None:
        """Count a failure of ``ident``: None while it may be retried (``key``, if
        given, is held meanwhile), else the number of attempts (give up: dead-letter)."""
        attempts = self._attempts.get(ident, 0) + 1
        if attempts < self.max_attempts:
            self._attempts[ident] = attempts
            if key is not None:
                self.held[key] = (ident, now_ms + HOLD_TIMEOUT_MS)
            return None
        self._attempts.pop(ident, None)
        if key is not None:
            self.held.pop(key, None)
        return attempts

    def succeeded(self, key: bytes, ident: bytes) -> None:
        """``ident`` (of ``key``) went through: if it held its key, it does no more."""
        held = self.held.get(key)
        if held is not None and held[0] == ident:
            del self.held[key]

    def committed(self, idents: Iterable[bytes]) -> None:
        """These records or timers are done: forget their attempts."""
        if self._attempts:
            for ident in idents:
                self._attempts.pop(ident, None)
