"""``BatchOutcome``: what one commit of an interval did, for whoever acks and sends."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine._frames import Frame
from engine._production_ids import Production


@dataclass
class BatchOutcome:
    """What one commit did: ids to ack, ids to leave unacked, productions to send."""

    committed: list[bytes] = field(default_factory=list)
    duplicates: list[bytes] = field(default_factory=list)
    rejected: list[tuple[bytes, int, str]] = field(default_factory=list)
    retry: list[bytes] = field(default_factory=list)
    dead_lettered: list[bytes] = field(default_factory=list)
    productions: list[Production] = field(default_factory=list)
    """Every production made, in the order they were made."""
    frames: list[Frame] = field(default_factory=list)
    """What the commit checkpointed, one frame per destination: what to send."""
    late_ms: list[int] = field(default_factory=list)
    """The lateness of each record user code reported late (``Context.report_late``)."""
    timers_fired: int = 0
    timers_failed: int = 0
    """Timers whose user code raised: kept for a retry next round, or dead-lettered."""
