"""The :class:`computations.BatchContext` of one ``process_batch`` call: a scope per key.

Each key's changes are buffered in a :class:`RecordScope` of its own that may
not produce; :meth:`BatchScope.apply` moves those of the keys the call took
whole into the transaction once it returned, and nothing is applied if it
raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from computations import Computation
from engine._keying import Admitted
from engine._outcome import BatchOutcome
from engine._scope import RecordScope

_log = logging.getLogger(__name__)
_warned: set[str] = set()
"""Computation classes whose process_batch failure was logged (once each)."""


def offer_batch(
    user: Computation,
    batch: BatchScope,
    admitted: Admitted,
    held: Mapping[bytes, Any],
    outcome: BatchOutcome,
) -> Admitted:
    """Offer the new records to ``user.process_batch`` (held keys' records excepted:
    they wait for their failed record, one at a time); apply what it did to the keys
    it took whole, count their records committed, and return the records of the
    others (all of them if it raised)."""
    offered = [item for item in admitted if item[2] not in held] if held else admitted
    if not offered:
        return admitted
    user_records = [item[3] for item in offered]
    try:
        left = user.process_batch(batch, user_records)
        if len(left) == len(offered):
            return admitted  # it took nothing
        left_keys = {r.key for r in left}
    except Exception:  # raised, or returned something that is not records
        name = type(user).__name__
        if name not in _warned:
            _warned.add(name)
            _log.exception("%s.process_batch failed: its batches go one record at a time", name)
        return admitted  # nothing was applied: each record is processed on its own
    left_keys.update(held)
    outcome.late_ms.extend(batch.apply(skip=left_keys))
    rest = []
    for item in admitted:
        if item[2] in left_keys:
            rest.append(item)
        else:
            outcome.committed.append(item[1])
    return rest


class BatchScope:
    """Implements :class:`computations.BatchContext`."""

    def __init__(
        self, new_scope: Callable[[bytes], RecordScope], low_watermark: int | None, now_ms: int
    ) -> None:
        """``new_scope``: a key's scope, one that may not produce."""
        self._new_scope = new_scope
        self._low_watermark = low_watermark
        self._now_ms = now_ms
        self.scopes: dict[bytes, RecordScope] = {}

    @property
    def low_watermark(self) -> int | None:
        return self._low_watermark

    @property
    def processing_time_ms(self) -> int:
        return self._now_ms

    def for_key(self, key: bytes) -> RecordScope:
        scope = self.scopes.get(key)
        if scope is None:
            scope = self.scopes[key] = self._new_scope(key)
        return scope

    def apply(self, skip: AbstractSet[bytes] = frozenset()) -> list[int]:
        """Move every key's changes but ``skip``'s into the transaction; returns the
        lateness of the records reported late."""
        late: list[int] = []
        for key, scope in self.scopes.items():
            if key not in skip:
                scope.apply()
                late.extend(scope.late_ms)
        return late
