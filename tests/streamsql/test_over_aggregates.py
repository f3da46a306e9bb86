"""``OVER`` aggregates: each row written once more with aggregates over its frame.

Over an append-only table (ordered by its event time, written once the watermark
passes) with ``ROWS n PRECEDING``, ``RANGE INTERVAL ... PRECEDING`` and unbounded
frames, out of order, with NULLs and crashes; over an updating input (an unwindowed
``GROUP BY``'s rows) whose changes take rows back; a row behind what was written is
late. Each against SQL's answer computed here in plain Python."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import SqlError, compile_sql
from tests.streamsql._nexmark_answers import remaining, rows
from tests.streamsql._run import sql_outputs

TABLES = """
CREATE TABLE t (k VARCHAR, v BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('stream' = 'rows');
CREATE TABLE o (k VARCHAR, v BIGINT, ts TIMESTAMP(3), c BIGINT, s BIGINT, lo BIGINT,
                a DOUBLE) WITH ('stream' = 'out');
"""
Row = dict[str, Any]
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
row_strategy = st.fixed_dictionaries({
    "k": st.sampled_from(["a", "b"]),
    "v": st.one_of(st.none(), st.integers(-5, 50)),
    "ts": st.integers(0, 40).map(lambda s: s * 250),  # ties and disorder
})  # fmt: skip


def over_query(frame: str) -> str:
    window = f"(PARTITION BY k ORDER BY ts {frame})"
    return (f"INSERT INTO o SELECT k, v, ts, COUNT(v) OVER {window}, SUM(v) OVER {window}, "
            f"MIN(v) OVER {window}, AVG(v) OVER {window} FROM t;")  # fmt: skip


def canonical(row: Row) -> tuple[int, str]:
    """The order of a partition's rows: time, then the row's canonical JSON text."""
    return row["ts"], json.dumps(row, sort_keys=True, separators=(",", ":"))


def expected_rows(input_rows: list[Row], frame_of: Any) -> list[str]:
    partitions: dict[str, list[Row]] = defaultdict(list)
    for row in input_rows:
        partitions[row["k"]].append(row)
    found = []
    for ordered in partitions.values():
        ordered.sort(key=canonical)
        for i, row in enumerate(ordered):
            values = [r["v"] for r in frame_of(ordered, i) if r["v"] is not None]
            found.append({
                **row, "c": len(values), "s": sum(values) if values else None,
                "lo": min(values) if values else None,
                "a": int(sum(values) / len(values)) if values else None,  # AVG(BIGINT)
            })  # fmt: skip
    return rows(found)


FRAMES = {
    "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW": lambda rs, i: rs[max(0, i - 2) : i + 1],
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW": lambda rs, i: rs[: i + 1],
    "RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW": lambda rs, i: [
        r for r in rs if rs[i]["ts"] - 1000 <= r["ts"] <= rs[i]["ts"]
    ],
    "": lambda rs, i: [r for r in rs if r["ts"] <= rs[i]["ts"]],  # RANGE UNBOUNDED
}


@pytest.mark.parametrize("frame", list(FRAMES))
@SETTINGS
@given(st.lists(row_strategy, max_size=25), st.sampled_from([0, 3]))
def test_append_only_frames(frame: str, input_rows: list[Row], crash_every: int) -> None:
    feeds = [("rows", row, row["ts"]) for row in input_rows]
    out = sql_outputs(TABLES + over_query(frame), feeds, crash_every=crash_every)
    assert rows(out) == expected_rows(input_rows, FRAMES[frame])


def test_a_row_behind_what_was_written_is_late() -> None:
    pipeline = compile_sql(TABLES + over_query("ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"))
    harness = TestHarness(Topology.from_dict(pipeline.topology))
    harness.feed("rows", b"", json.dumps({"k": "a", "v": 1, "ts": 5000}).encode(), 5000)
    harness.run()
    harness.advance_watermark(6000)
    harness.feed("rows", b"", json.dumps({"k": "a", "v": 2, "ts": 4000}).encode(), 4000)
    harness.feed("rows", b"", json.dumps({"k": "a", "v": 3, "ts": 7000}).encode(), 7000)
    harness.run()
    harness.advance_watermark(MAX_TIME)
    out = [json.loads(r.value) for r in harness.outputs("out")]
    assert [(r["v"], r["s"]) for r in out] == [(1, 1), (3, 4)]


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 9)),
             max_size=25),
    st.sampled_from([0, 4]),
)  # fmt: skip
def test_an_updating_input(changes: list[tuple[str, int, int]], crash_every: int) -> None:
    """Per (k, g) the largest v so far (an updating GROUP BY), then per k, in order of g,
    the sum over each row and the one before it: the table the rows leave is the
    answer over the final groups."""
    sql = """
    CREATE TABLE g (k VARCHAR, g BIGINT, v BIGINT, ts TIMESTAMP(3),
                    WATERMARK FOR ts AS ts) WITH ('stream' = 'rows');
    CREATE TABLE o (k VARCHAR, g BIGINT, top BIGINT, s BIGINT) WITH ('stream' = 'out');
    INSERT INTO o SELECT k, g, top,
        SUM(top) OVER (PARTITION BY k ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
    FROM (SELECT k, g, MAX(v) AS top FROM g GROUP BY k, g);
    """
    feeds = [("rows", {"k": k, "g": g, "v": v, "ts": i}, i)
             for i, (k, g, v) in enumerate(changes, 1)]  # fmt: skip
    out = sql_outputs(sql, feeds, crash_every=crash_every)
    tops: dict[tuple[str, int], int] = {}
    for k, g, v in changes:
        tops[(k, g)] = max(tops.get((k, g), v), v)
    found = []
    for k in ("a", "b"):
        ordered = sorted((g, top) for (key, g), top in tops.items() if key == k)
        for i, (g, top) in enumerate(ordered):
            found.append({"k": k, "g": g, "top": top,
                          "s": sum(t for _, t in ordered[max(0, i - 1) : i + 1])})  # fmt: skip
    assert remaining(out) == rows(found)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ("SUM(v) OVER (PARTITION BY k ORDER BY ts DESC)", "ORDER BY one column ascending"),
        ("SUM(v) OVER (PARTITION BY k ORDER BY v)", "ORDER BY the table's event time"),
        ("SUM(v) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)",
         "the frames supported are"),
        ("SUM(v) OVER (ORDER BY ts), COUNT(*) OVER (PARTITION BY k ORDER BY ts)",
         "must share one PARTITION BY"),
        ("COUNT(DISTINCT v) OVER (ORDER BY ts)", "COUNT(DISTINCT ...) OVER is not supported"),
        ("LAG(v) OVER (ORDER BY ts)", "the aggregates supported are COUNT"),
    ],
)  # fmt: skip
def test_what_is_refused(over: str, message: str) -> None:
    sql = ("CREATE TABLE p (k VARCHAR, x BIGINT, y BIGINT) WITH ('stream' = 'out');"
           f"INSERT INTO p SELECT k, {over} FROM t;")  # fmt: skip
    with pytest.raises(SqlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_sql(TABLES + sql)


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.integers(0, 9)),
             max_size=25),
)  # fmt: skip
def test_an_updating_input_with_an_unbounded_range(changes: list[tuple[str, int, int]]) -> None:
    """The default frame (RANGE UNBOUNDED PRECEDING) over an updating input: the rows of
    one ORDER BY value see each other."""
    sql = """
    CREATE TABLE g (k VARCHAR, g BIGINT, v BIGINT, ts TIMESTAMP(3),
                    WATERMARK FOR ts AS ts) WITH ('stream' = 'rows');
    CREATE TABLE o (k VARCHAR, g BIGINT, c BIGINT, s BIGINT) WITH ('stream' = 'out');
    INSERT INTO o SELECT k, g, c, SUM(c) OVER (PARTITION BY k ORDER BY c)
    FROM (SELECT k, g, COUNT(*) AS c FROM g GROUP BY k, g);
    """
    feeds = [("rows", {"k": k, "g": g, "v": v, "ts": i}, i)
             for i, (k, g, v) in enumerate(changes, 1)]  # fmt: skip
    out = sql_outputs(sql, feeds, crash_every=0)
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for k, g, _ in changes:
        counts[(k, g)] += 1
    found = [
        {"k": k, "g": g, "c": c,
         "s": sum(n for (key, _), n in counts.items() if key == k and n <= c)}
        for (k, g), c in counts.items()
    ]  # fmt: skip
    assert remaining(out) == rows(found)


def test_a_named_window_is_the_same_as_its_text() -> None:
    window = "(PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"
    named = (f"INSERT INTO o SELECT k, v, ts, COUNT(v) OVER w, SUM(v) OVER w, MIN(v) OVER w, "
             f"AVG(v) OVER w FROM t WINDOW w AS {window};")  # fmt: skip
    assert (
        compile_sql(TABLES + named).topology
        == compile_sql(TABLES + over_query("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW")).topology
    )
    with pytest.raises(SqlError, match="no WINDOW w2 AS"):
        compile_sql(TABLES + named.replace("SUM(v) OVER w", "SUM(v) OVER w2"))
