"""``StoreView``: what a :class:`~statestore.transaction.Transaction` uses of its
:class:`~statestore.store.StateStore` (reads, the dedup index, the engine, the
commit steps). The transaction is typed against this protocol, so ``store.py``
imports ``transaction.py`` and nothing imports it back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from millrace.statestore._bloom import Positions
from millrace.statestore._engine import Batch, Engine
from millrace.statestore._timer_index import TimerId
from millrace.statestore.config import StoreConfig
from millrace.statestore.dedup import DedupIndex, StagedIds
from millrace.statestore.types import TimeDomain, Timer


class StoreView(Protocol):
    """The store as its transactions see it."""

    config: StoreConfig
    _engine: Engine
    _dedup: DedupIndex

    @property
    def description(self) -> str:
        """Where the store lives, for messages."""
        ...

    @property
    def owner_epoch(self) -> int:
        """The highest epoch claimed so far."""
        ...

    def dedup_now(self) -> int:
        """The dedup clock (ms)."""
        ...

    def get(self, key: bytes) -> bytes | None:
        """A committed state value."""
        ...

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """Many committed state values."""
        ...

    def scan_state_range(self, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Committed state entries with ``start <= key < end``, in key order."""
        ...

    def get_meta(self, name: str) -> bytes | None:
        """A committed metadata entry."""
        ...

    def get_timer(self, domain: TimeDomain, key: bytes, tag: str) -> int | None:
        """A committed timer's time."""
        ...

    def _require_open(self) -> None: ...

    def _check_epoch(self, epoch: int) -> None: ...

    def _stage_epoch(self, batch: Batch, epoch: int) -> None: ...

    def _stage_dedup_clock(self, batch: Batch, now_ms: int) -> None: ...

    def _stage_timers(self, batch: Batch, timers: dict[TimerId, Timer | None]) -> None: ...

    def _lookup_ids(self, record_ids: Sequence[bytes], positions: Positions) -> list[bool]: ...

    def _write(self, batch: Batch, *, sync: bool) -> None: ...

    def _committed(
        self,
        epoch: int,
        staged: StagedIds | None,
        timers: dict[TimerId, Timer | None],
        state: dict[bytes, bytes | None],
    ) -> None: ...
