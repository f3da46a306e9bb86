"""``WindowOps``: what the modules of one kind of window (merging, sliding, the
vectorized batch path) use of a :class:`~dataflow.WindowedAggregation`.

They take the aggregation as this protocol rather than importing its class, so
that ``_aggregation.py`` imports them and nothing imports it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from millrace.computations import Context, Record, Serde
from millrace.dataflow._combiners import Combiner
from millrace.dataflow._panes import Pane
from millrace.dataflow._triggers import Accumulation, AfterWatermark
from millrace.dataflow._windows import Window, WindowAssigner


class WindowOps(Protocol):
    """A windowed aggregation's settings and per-window steps."""

    window: WindowAssigner
    aggregate: Combiner
    field: str | None
    trigger: AfterWatermark
    input_panes: bool
    allowed_lateness_ms: int
    output: str
    accumulation: Accumulation

    @property
    def state_serde(self) -> Serde[Any]:
        """How its window states are encoded."""
        ...

    def _open(
        self, ctx: Context, window: Window, accumulator: Any, watermark: int | None
    ) -> dict[str, Any]:
        """A new window's state, with its timers set."""
        ...

    def _add(
        self,
        ctx: Context,
        window: Window,
        value: float,
        watermark: int | None,
        *,
        retract: bool = False,
    ) -> None:
        """Fold one value into ``window`` (opening it), firing what that fires."""
        ...

    def _expiry(self, window: Window) -> int:
        """When ``window``'s state is dropped (its end plus the allowed lateness)."""
        ...

    def _retract_last(self, ctx: Context, window: Window, state: dict[str, Any]) -> None:
        """In retracting mode, retract ``window``'s last pane."""
        ...

    def pane_records(self, pane: Pane) -> Sequence[tuple[bytes, bytes]]:
        """The output records' keys and values for a pane."""
        ...

    @property
    def native_panes(self) -> bool:
        """Whether on-time panes may be written natively (in format version 1)."""
        ...

    native_row: list[tuple[str, str]] | None
    """Else, the row each on-time pane is written natively as (names and what each
    column holds: ``millrace.dataplane.on_time_panes``'s ``row``), if it may be."""

    def _value_of(self, body: Any) -> Any:
        """The value a record whose value parses to ``body`` contributes (its field,
        checked)."""
        ...

    def _input(self, record: Record, *, parse: bool) -> tuple[Any, bool, Any]:
        """``(value to fold, whether it retracts, the parsed value)`` of a record (the
        value parsed once, when it is needed or ``parse``)."""
        ...
