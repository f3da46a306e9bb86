"""``GROUP BY`` without a window: an updating result, a row per input row saying what it
does (``$op``: ``+I``, ``-U``, ``+U``), and an aggregation of such a stream taking its
retracted rows back. Over arbitrary rows (NULLs, several keys), with crashes, the table
the rows leave equals SQL's answer computed here; every retraction takes back exactly
the row written before it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.streamsql._nexmark_answers import latest
from tests.streamsql._run import sql_outputs

TABLES = """
CREATE TABLE t (k VARCHAR, g BIGINT NOT NULL, v BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts) WITH ('stream' = 'rows');
"""
Row = dict[str, Any]
row_strategy = st.fixed_dictionaries({
    "k": st.sampled_from(["a", "b", None]),
    "g": st.integers(0, 2),
    "v": st.one_of(st.none(), st.integers(-5, 50)),
})  # fmt: skip


def run(sql: str, rows: list[Row], crash_every: int) -> list[Row]:
    feeds = [("rows", {**row, "ts": i}, i) for i, row in enumerate(rows, 1)]
    return sql_outputs(TABLES + sql, feeds, crash_every=crash_every)


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(row_strategy, max_size=30), st.sampled_from([0, 4]))
def test_an_updating_aggregate_per_key(rows: list[Row], crash_every: int) -> None:
    sql = """
    CREATE TABLE o (k VARCHAR, g BIGINT, c BIGINT, s BIGINT, a BIGINT, d BIGINT)
        WITH ('stream' = 'out');
    INSERT INTO o SELECT k, g, COUNT(*), SUM(v), AVG(v), COUNT(DISTINCT v) FROM t
    GROUP BY k, g;
    """
    groups: dict[tuple[Any, int], list[Any]] = defaultdict(list)
    for row in rows:
        groups[(row["k"], row["g"])].append(row["v"])
    expected = {}
    for (k, g), values in groups.items():
        present = [v for v in values if v is not None]
        expected[(k, g)] = {
            "k": k, "g": g, "c": len(values), "s": sum(present) if present else None,
            "a": int(sum(present) / len(present)) if present else None,
            "d": len(set(present)),
        }  # fmt: skip
    out = run(sql, rows, crash_every)
    by_group = latest([{**r, "kg": json.dumps([r["k"], r["g"]])} for r in out], "kg")
    got = {
        tuple(json.loads(kg)): {k: v for k, v in r.items() if k != "kg"}
        for kg, r in by_group.items()
    }
    assert got == expected


@SETTINGS
@given(st.lists(row_strategy, max_size=30))
def test_an_aggregate_of_an_updating_aggregate_takes_retractions_back(rows: list[Row]) -> None:
    sql = """
    CREATE TABLE o (g BIGINT, keys BIGINT, total BIGINT) WITH ('stream' = 'out');
    INSERT INTO o SELECT g, COUNT(*), SUM(n) FROM (
        SELECT k, g, COUNT(*) AS n FROM t GROUP BY k, g
    ) GROUP BY g;
    """
    per_key: dict[tuple[Any, int], int] = defaultdict(int)
    for row in rows:
        per_key[(row["k"], row["g"])] += 1
    expected: dict[int, Row] = {}
    for (_, g), n in per_key.items():
        found = expected.setdefault(g, {"g": g, "keys": 0, "total": 0})
        found["keys"] += 1
        found["total"] += n
    assert latest(run(sql, rows, 0), "g") == expected
