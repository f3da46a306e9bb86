"""A harness over the smallest topology: stream ``in`` into computation ``c``, keyed by
the record's key, producing to ``out``."""

from __future__ import annotations

from millrace.computations import Topology
from millrace.computations.testing import TestHarness


def harness_of(handler: str) -> TestHarness:
    """A :class:`TestHarness` of ``in`` -> ``c`` (``handler``, ``module:Class``) -> ``out``."""
    return TestHarness(
        Topology.from_dict(
            {
                "streams": {"in": {}, "out": {}},
                "computations": {
                    "c": {"handler": handler, "inputs": {"in": "key"}, "outputs": ["out"]}
                },
            }
        )
    )
