"""SQL joins of two streams (interval bounds written every way round, inner and outer,
residual conditions, a self-join) over arbitrary rows, run in ``TestHarness`` with the
watermark following the input (so a row leaves the join's state once no partner can
come), against the nested-loop join of SQL's semantics computed here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import compile_sql

TABLES = """
CREATE TABLE l (k BIGINT NOT NULL, v BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('stream' = 'lefts');
CREATE TABLE r (k BIGINT NOT NULL, w BIGINT, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('stream' = 'rights');
CREATE TABLE o (lk BIGINT, v BIGINT, w BIGINT, lt TIMESTAMP(3), rt TIMESTAMP(3))
    WITH ('stream' = 'out');
"""
Row = dict[str, Any]
rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["lefts", "rights"]),
        st.integers(0, 3),
        st.one_of(st.none(), st.integers(0, 9)),
        st.integers(0, 1_500),
        st.integers(0, 900),
    ),
    max_size=30,
)


def events(raw: list[tuple[str, int, int | None, int, int]]) -> list[tuple[str, Row]]:
    """Rows with times that grow by ``step`` but arrive up to 900 ms out of order."""
    t, out = 10_000, []
    for stream, k, value, step, jitter in raw:
        t += step
        field = "v" if stream == "lefts" else "w"
        out.append((stream, {"k": k, field: value, "ts": max(t - jitter, 0)}))
    return out


def run(sql: str, rows: list[tuple[str, Row]]) -> list[Row]:
    harness = TestHarness(Topology.from_dict(compile_sql(TABLES + sql).topology))
    high = 0
    for i, (stream, row) in enumerate(rows):
        harness.feed(stream, b"", json.dumps(row).encode(), row["ts"])
        high = max(high, row["ts"])
        if i % 4 == 3:
            harness.run()
            harness.advance_watermark(high - 1_000)  # no row is late: jitter < 1 s
    harness.run()
    harness.advance_watermark(MAX_TIME)
    return [json.loads(r.value) for r in harness.outputs("out")]


def nested_loop(
    rows: list[tuple[str, Row]], how: str, on: Any, where: Any = lambda a, b: True
) -> list[Row]:
    lefts = [r for s, r in rows if s == "lefts"]
    rights = [r for s, r in rows if s == "rights"]
    out, left_seen, right_seen = [], set(), set()
    for i, a in enumerate(lefts):
        for j, b in enumerate(rights):
            if a["k"] == b["k"] and on(a, b):
                left_seen.add(i)
                right_seen.add(j)
                if where(a, b):
                    out.append(pair(a, b))
    if how in ("left", "full"):
        out.extend(pair(a, None) for i, a in enumerate(lefts) if i not in left_seen)
    if how in ("right", "full"):
        out.extend(pair(None, b) for j, b in enumerate(rights) if j not in right_seen)
    return out


def pair(a: Row | None, b: Row | None) -> Row:
    return {
        "lk": a["k"] if a else None, "v": a["v"] if a else None, "w": b["w"] if b else None,
        "lt": a["ts"] if a else None, "rt": b["ts"] if b else None,
    }  # fmt: skip


def canonical(rows: list[Row]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SELECT = "INSERT INTO o SELECT L.k, L.v, R.w, L.ts, R.ts FROM l L"


@SETTINGS
@given(rows_strategy)
def test_an_inner_interval_join_with_a_residual_condition(raw: list[Any]) -> None:
    rows = events(raw)
    sql = (f"{SELECT} JOIN r R ON L.k = R.k AND R.ts BETWEEN L.ts - INTERVAL '2' SECOND "
           "AND L.ts + INTERVAL '1' SECOND WHERE L.v > R.w")  # fmt: skip
    expected = nested_loop(
        rows, "inner", lambda a, b: a["ts"] - 2_000 <= b["ts"] <= a["ts"] + 1_000,
        lambda a, b: a["v"] is not None and b["w"] is not None and a["v"] > b["w"],
    )  # fmt: skip
    assert canonical(run(sql, rows)) == canonical(expected)


@SETTINGS
@given(rows_strategy, st.sampled_from(["LEFT", "RIGHT", "FULL OUTER"]))
def test_outer_joins_with_bounds_written_the_other_way_round(raw: list[Any], how: str) -> None:
    rows = events(raw)
    sql = (f"{SELECT} {how} JOIN r R ON R.k = L.k AND L.ts >= R.ts - INTERVAL '1' SECOND "
           "AND L.ts < R.ts + INTERVAL '3' SECOND")  # fmt: skip
    expected = nested_loop(
        rows,
        how.split(maxsplit=1)[0].lower(),
        lambda a, b: b["ts"] - 1_000 <= a["ts"] < b["ts"] + 3_000,
    )
    assert canonical(run(sql, rows)) == canonical(expected)


@SETTINGS
@given(rows_strategy)
def test_a_self_join_reads_one_stream_on_both_sides(raw: list[Any]) -> None:
    rows = [(s, r) for s, r in events(raw) if s == "lefts"]
    sql = ("INSERT INTO o SELECT A.k, A.v, B.v, A.ts, B.ts FROM l A JOIN l B "
           "ON A.k = B.k AND A.ts BETWEEN B.ts AND B.ts + INTERVAL '1' SECOND")  # fmt: skip
    lefts = [r for _, r in rows]
    expected = [
        {"lk": a["k"], "v": a["v"], "w": b["v"], "lt": a["ts"], "rt": b["ts"]}
        for a in lefts for b in lefts
        if a["k"] == b["k"] and b["ts"] <= a["ts"] <= b["ts"] + 1_000
    ]  # fmt: skip
    assert canonical(run(sql, rows)) == canonical(expected)


def test_a_join_without_time_bounds_needs_a_state_ttl() -> None:
    from millrace.streamsql import SqlError

    with pytest.raises(SqlError, match=r"table\.exec\.state\.ttl"):
        compile_sql(TABLES + f"{SELECT} JOIN r R ON L.k = R.k")
    pipeline = compile_sql(TABLES + f"SET 'table.exec.state.ttl' = '90 s'; {SELECT} "
                           "JOIN r R ON L.k = R.k")  # fmt: skip
    [join] = pipeline.topology["computations"].values()
    assert (join["params"]["lower_ms"], join["params"]["upper_ms"]) == (-90_000, 90_000)
