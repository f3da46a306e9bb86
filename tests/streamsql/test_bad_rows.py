"""Bad rows: a value that is not a JSON object, a division by zero, a string compared
with a number, an aggregate of a string; each is dead-lettered with a message saying
what failed, and every other row's result is exact (projection, window aggregation
and join alike)."""

from __future__ import annotations

import json
from typing import Any

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import compile_sql

TABLES = """
CREATE TABLE t (k BIGINT NOT NULL, a BIGINT, b BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts) WITH ('stream' = 'rows');
"""
GOOD = [{"k": 1, "a": 6, "b": 3, "ts": 10}, {"k": 1, "a": 8, "b": 2, "ts": 20}]
BAD: list[tuple[bytes, str]] = [
    (b"[1, 2]", "a row is a JSON object"),
    (b"not json", "Expecting value"),
    (json.dumps({"k": 1, "a": 1, "b": 0, "ts": 30}).encode(), "division by zero"),
    (json.dumps({"k": 1, "a": "x", "b": 1, "ts": 40}).encode(), "is not a number"),
]


def run(sql: str) -> tuple[TestHarness, list[Any], str]:
    pipeline = compile_sql(TABLES + sql)
    harness = TestHarness(Topology.from_dict(pipeline.topology), dead_letters=True)
    for row in GOOD:
        harness.feed("rows", b"", json.dumps(row).encode(), row["ts"])
    for n, (value, _) in enumerate(BAD):
        harness.feed("rows", b"", value, 100 + n)
    harness.run()
    harness.advance_watermark(MAX_TIME)
    harness.run()
    [name] = [c for c in pipeline.topology["computations"] if "keyed" not in c]
    return harness, [json.loads(r.value) for r in harness.outputs("out")], name


def test_a_projection_dead_letters_each_bad_row_with_its_reason() -> None:
    harness, out, name = run(
        "CREATE TABLE o (k BIGINT, q BIGINT) WITH ('stream' = 'out');"
        "INSERT INTO o SELECT k, a / b FROM t;"
    )
    assert out == [{"k": 1, "q": 2}, {"k": 1, "q": 4}]
    reasons = [letter.error for letter in harness.dead_letters(name)]
    assert len(reasons) == len(BAD)
    for _, reason in BAD:
        assert any(reason in r for r in reasons), (reason, reasons)


def test_a_window_aggregation_keeps_exact_results_around_bad_rows() -> None:
    harness, out, _ = run(
        "CREATE TABLE o (k BIGINT, total BIGINT, q BIGINT) WITH ('stream' = 'out');"
        "INSERT INTO o SELECT k, SUM(a), MAX(a / b) FROM TABLE(TUMBLE(TABLE t, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end;"
    )
    assert out == [{"k": 1, "total": 14, "q": 4}]
    dead = [letter.error for c in ("o", "o_keyed") for letter in harness.dead_letters(c)]
    assert len(dead) == len(BAD), dead
