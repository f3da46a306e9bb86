"""Running planned SQL in ``TestHarness``, as the SQL tests do."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import compile_sql


def sql_outputs(
    sql: str, rows: Iterable[tuple[str, dict[str, Any], int]], *, crash_every: int = 0
) -> list[Any]:
    """The rows ``sql`` writes to ``out``, fed ``(stream, row, event time)`` in order
    (losing what is not committed every ``crash_every`` rows), then the end of input."""
    pipeline = compile_sql(sql)
    harness = TestHarness(Topology.from_dict(pipeline.topology))
    for n, (stream, row, t) in enumerate(rows, 1):
        if stream in pipeline.sources:
            harness.feed(stream, b"", json.dumps(row).encode(), t)
        if crash_every and n % crash_every == 0:
            harness.step()
            harness.crash()
    harness.run()
    harness.advance_watermark(MAX_TIME)
    return [json.loads(record.value) for record in harness.outputs("out")]
