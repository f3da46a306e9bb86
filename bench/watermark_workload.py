"""The watermark benchmark's computations (node processes import ``bench.watermark_workload``).

``Forward``: forwards every record unchanged (same key, value and event time)
to the output stream named by its ``to`` param. It keeps no state and sets no
timers, so a stage's oldest work is only what it has received but not yet
committed and delivered downstream: the watermark lag the benchmark measures
is the pipeline's own (transport, commit, reporting), not the user code's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.computations import Computation, Context, Record


class Forward(Computation):
    """Produces each input record, as it is, to the stream named by the ``to`` param."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Read the output stream's name (``params["to"]``)."""
        self.to = str(params["to"])

    def process_record(self, ctx: Context, record: Record) -> None:
        """Forward the record: same key, value and event time."""
        ctx.produce(self.to, ctx.key, record.value)
