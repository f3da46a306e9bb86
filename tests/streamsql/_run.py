"""Running planned SQL in ``TestHarness``, as the SQL tests do."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from examples.nexmark.__main__ import harness_outputs
from millrace.computations import Topology
from millrace.streamsql import compile_sql


def sql_outputs(
    sql: str, rows: Iterable[tuple[str, dict[str, Any], int]], *, crash_every: int = 0
) -> list[Any]:
    """The rows ``sql`` writes to ``out``, fed ``(stream, row, event time)`` in order
    (losing what is not committed every ``crash_every`` rows), then the end of input."""
    pipeline = compile_sql(sql)
    return harness_outputs(Topology.from_dict(pipeline.topology), rows, crash_every=crash_every)
