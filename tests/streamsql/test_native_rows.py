"""A window's row written natively (``native/core/src/panes.rs`` ``on_time_row``) is
byte for byte the row ``SqlWindowAggregate.pane_record`` writes in Python: the same
query over arbitrary keys (any Unicode, integers of any size and sign, NULL) run both
ways gives the same output records."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import SqlWindowAggregate, compile_sql

SQL = """
CREATE TABLE t (name VARCHAR NOT NULL, id BIGINT, v BIGINT NOT NULL, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts) WITH ('stream' = 'rows');
CREATE TABLE o (k {kind}, c BIGINT, s BIGINT, lo BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3))
    WITH ('stream' = 'out');
INSERT INTO o
SELECT {key}, COUNT(*), SUM(v), MIN(v), window_start, window_end
FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY {key}, window_start, window_end;
"""


class PythonRows(SqlWindowAggregate):
    """The same computation, its rows always made in Python."""

    def setup(self, params: Mapping[str, Any]) -> None:
        super().setup(params)
        self.native_row = None


def outputs(key: str, kind: str, rows: list[dict[str, Any]], *, native: bool) -> list[Any]:
    topology = compile_sql(SQL.format(key=key, kind=kind)).topology
    [spec] = topology["computations"].values()
    assert spec["params"]["aggregate"] == "count+sum+min"
    if not native:
        spec["handler"] = PythonRows
    harness = TestHarness(Topology.from_dict(topology))
    for row in rows:
        harness.feed("rows", b"", json.dumps(row).encode(), row["ts"])
    harness.run()
    harness.advance_watermark(MAX_TIME)
    return sorted((r.key, r.value, r.event_time_ms) for r in harness.outputs("out"))


row_strategy = st.fixed_dictionaries({
    "name": st.text(max_size=4),
    "id": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(-3, 3)),
    "v": st.integers(-(2**40), 2**40),
    "ts": st.integers(0, 60_000),
})  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_strategy, min_size=1, max_size=30), st.sampled_from(["name", "id"]))
def test_native_rows_equal_pythons_byte_for_byte(rows: list[dict[str, Any]], key: str) -> None:
    kind = "VARCHAR" if key == "name" else "BIGINT"
    native = outputs(key, kind, rows, native=True)
    assert native == outputs(key, kind, rows, native=False)
    assert len(native) == len({(r[key], r["ts"] // 10_000) for r in rows})
