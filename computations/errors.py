"""Errors of the user API and the node runtime."""

from __future__ import annotations


class TopologyError(ValueError):
    """The topology is invalid; the message lists every problem, each naming its culprit."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid topology:\n  - " + "\n  - ".join(problems))


class ProduceError(ValueError):
    """User code produced what it cannot: to a stream its computation does not declare
    as an output, at an event time out of range, or a record over
    :data:`~computations.MAX_PRODUCED_BYTES`."""


class TimerError(ValueError):
    """User code set a timer its computation cannot handle."""
