"""``BatchOutcome``: what one commit of an interval did, for whoever acks and sends."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat

from millrace.engine._frames import Frame
from millrace.engine._production_ids import Production
from millrace.engine._received import Received
from millrace.engine._routing import FrameBuilder


@dataclass
class BatchOutcome:
    """What one commit did: ids to ack, ids to leave unacked, productions to send."""

    committed: list[bytes] = field(default_factory=list)
    duplicates: list[bytes] = field(default_factory=list)
    rejected: list[tuple[bytes, int, str]] = field(default_factory=list)
    retry: list[bytes] = field(default_factory=list)
    dead_lettered: list[bytes] = field(default_factory=list)
    built: FrameBuilder | None = None
    """Every production made (framed natively; parsed only when asked for)."""
    frames: list[Frame] = field(default_factory=list)
    """What the commit checkpointed, in frames per destination: what to send."""
    late_ms: list[int] = field(default_factory=list)
    """The lateness of each record user code reported late (``Context.report_late``)."""
    timers_fired: int = 0
    timers_failed: int = 0
    """Timers whose user code raised: kept for a retry next round, or dead-lettered."""

    @property
    def productions(self) -> list[Production]:
        """Every production made, destination by destination, each in the order made."""
        return self.built.productions if self.built is not None else []

    @property
    def produced(self) -> int:
        """How many productions were made (without parsing them)."""
        return len(self.built) if self.built is not None else 0

    @property
    def outbox_keys(self) -> list[bytes]:
        """Every production's outbox key, as :attr:`productions` orders them (without
        parsing them)."""
        if self.built is None:
            return []
        return [key for frame in self.built.built() for key in frame.outbox_keys]

    def production_columns(self) -> tuple[list[str], list[int], Received]:
        """Every production as columns, as :attr:`productions` orders them: each one's
        consumer, its interval, and the records' fields (decoded natively from the
        frames, without an object per production)."""
        frames = self.built.built() if self.built is not None else []
        consumers: list[str] = []
        intervals: list[int] = []
        for frame in frames:
            consumers.extend(repeat(frame.consumer, len(frame)))
            intervals.extend(repeat(frame.interval, len(frame)))
        records = Received.decode([frame.encoded() for frame in frames], interval=0, intervals=1)
        return consumers, intervals, records
