"""Windowed ``GROUP BY`` queries over arbitrary rows (NULLs, strings, floats, several
keys, no key), planned and run in ``TestHarness``, against SQL's semantics computed
here in plain Python: each window's groups, NULLs skipped by the aggregates, Flink's
``AVG`` of integers truncated, ``WHERE`` before and ``HAVING`` after grouping."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.streamsql import compile_sql
from tests.streamsql._run import sql_outputs

TABLE = """
CREATE TABLE t (k VARCHAR, n BIGINT, x DOUBLE, s VARCHAR, v BIGINT NOT NULL, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('stream' = 'rows');
"""

Row = dict[str, Any]

row_strategy = st.fixed_dictionaries({
    "k": st.sampled_from(["a", "b", "é", None]),
    "n": st.one_of(st.none(), st.integers(-5, 20)),
    "x": st.floats(-100, 100, allow_nan=False).map(lambda f: round(f, 2)),
    "s": st.one_of(st.none(), st.sampled_from(["p", "q", "r"])),
    "v": st.integers(0, 1_000),
    "dt": st.integers(0, 4_000),
})  # fmt: skip


def with_times(rows: list[Row]) -> list[Row]:
    """Times that grow (by ``dt``), so no row is late."""
    t = 0
    out = []
    for row in rows:
        t += row["dt"]
        out.append({**{k: v for k, v in row.items() if k != "dt"}, "ts": t})
    return out


def run(sql: str, rows: list[Row], *, crash_every: int = 0) -> list[Row]:
    feeds = [("rows", row, row["ts"]) for row in rows]
    return sql_outputs(TABLE + sql, feeds, crash_every=crash_every)


def tumbling(size: int) -> Callable[[int], list[tuple[int, int]]]:
    return lambda t: [(t - t % size, t - t % size + size)]


def hopping(size: int, slide: int) -> Callable[[int], list[tuple[int, int]]]:
    def windows(t: int) -> list[tuple[int, int]]:
        last = t - t % slide
        return [(s, s + size) for s in range(last - size + slide, last + 1, slide) if s <= t]

    return windows


def groups(
    rows: list[Row], windows: Callable[[int], list[tuple[int, int]]], key: Callable[[Row], Any]
) -> dict[tuple[Any, tuple[int, int]], list[Row]]:
    found: dict[tuple[Any, tuple[int, int]], list[Row]] = defaultdict(list)
    for row in rows:
        for window in windows(row["ts"]):
            found[(key(row), window)].append(row)
    return found


def present(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def truncated_avg(values: list[int]) -> int | None:
    if not values:
        return None
    total, count = sum(values), len(values)
    return int(total / count)


def canonical(rows: list[Row]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(row_strategy, max_size=40), st.sampled_from([0, 7]))
def test_sql_aggregates_of_nullable_columns_per_key_and_tumbling_window(
    raw: list[Row], crash_every: int
) -> None:
    rows = with_times(raw)
    sql = """
    CREATE TABLE o (k VARCHAR, c BIGINT, cn BIGINT, sn BIGINT, mins VARCHAR, maxx DOUBLE,
                    an BIGINT, ds BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3))
        WITH ('stream' = 'out');
    INSERT INTO o
    SELECT k, COUNT(*), COUNT(n), SUM(n), MIN(s), MAX(x), AVG(n), COUNT(DISTINCT s),
           window_start, window_end
    FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    WHERE n IS NULL OR n > 3
    GROUP BY k, window_start, window_end
    HAVING COUNT(*) > 1;
    """
    kept = [r for r in rows if r["n"] is None or r["n"] > 3]
    expected = []
    for (k, (start, end)), members in groups(kept, tumbling(10_000), lambda r: r["k"]).items():
        if len(members) <= 1:
            continue
        ns = present([m["n"] for m in members])
        ss = present([m["s"] for m in members])
        expected.append({
            "k": k, "c": len(members), "cn": len(ns), "sn": sum(ns) if ns else None,
            "mins": min(ss) if ss else None, "maxx": max(m["x"] for m in members),
            "an": truncated_avg(ns), "ds": len(set(ss)), "ws": start, "we": end,
        })  # fmt: skip
    assert canonical(run(sql, rows, crash_every=crash_every)) == canonical(expected)


@SETTINGS
@given(st.lists(row_strategy, max_size=40))
def test_two_key_columns_and_an_expression_over_hopping_windows(raw: list[Row]) -> None:
    rows = with_times(raw)
    sql = """
    CREATE TABLE o (k VARCHAR, s VARCHAR, total BIGINT, ws TIMESTAMP(3), label VARCHAR)
        WITH ('stream' = 'out');
    INSERT INTO o
    SELECT k, s, SUM(v * 2) + 1 AS total, window_start, UPPER(s) || '!' AS label
    FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
    GROUP BY k, s, window_start, window_end;
    """
    expected = [
        {"k": k, "s": s, "total": sum(m["v"] * 2 for m in members) + 1, "ws": start,
         "label": None if s is None else s.upper() + "!"}
        for ((k, s), (start, _)), members in groups(
            rows, hopping(6_000, 2_000), lambda r: (r["k"], r["s"])
        ).items()
    ]  # fmt: skip
    assert canonical(run(sql, rows)) == canonical(expected)


@SETTINGS
@given(st.lists(row_strategy, max_size=40), st.sampled_from([0, 5]))
def test_built_in_aggregates_of_a_not_null_column_over_all_rows_per_window(
    raw: list[Row], crash_every: int
) -> None:
    rows = with_times(raw)
    sql = """
    CREATE TABLE o (ws TIMESTAMP(3), c BIGINT, total BIGINT, biggest BIGINT, mean BIGINT)
        WITH ('stream' = 'out');
    INSERT INTO o
    SELECT TUMBLE_START(ts, INTERVAL '5' SECOND), COUNT(*), SUM(v), MAX(v), AVG(v)
    FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECOND);
    """
    pipeline = compile_sql(TABLE + sql)
    [spec] = pipeline.topology["computations"].values()
    assert spec["params"]["aggregate"] == "count+sum+max+mean"  # the native fold's
    expected = [
        {"ws": start, "c": len(members), "total": sum(m["v"] for m in members),
         "biggest": max(m["v"] for m in members),
         "mean": truncated_avg([m["v"] for m in members])}
        for (_, (start, _)), members in groups(rows, tumbling(5_000), lambda r: None).items()
    ]  # fmt: skip
    assert canonical(run(sql, rows, crash_every=crash_every)) == canonical(expected)


def cumulating(size: int, step: int) -> Callable[[int], list[tuple[int, int]]]:
    def windows(t: int) -> list[tuple[int, int]]:
        start = t - t % size
        return [(start, start + k * step) for k in range(1, size // step + 1)
                if start + k * step > t]  # fmt: skip

    return windows


@SETTINGS
@given(st.lists(row_strategy, max_size=40), st.sampled_from([0, 6]))
def test_running_counts_over_cumulating_windows(raw: list[Row], crash_every: int) -> None:
    rows = with_times(raw)
    sql = """
    CREATE TABLE o (k VARCHAR, c BIGINT, total BIGINT, ws TIMESTAMP(3), we TIMESTAMP(3))
        WITH ('stream' = 'out');
    INSERT INTO o
    SELECT k, COUNT(*), SUM(v), window_start, window_end
    FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
    GROUP BY k, window_start, window_end;
    """
    expected = [
        {"k": k, "c": len(members), "total": sum(m["v"] for m in members), "ws": start,
         "we": end}
        for (k, (start, end)), members in groups(rows, cumulating(6_000, 2_000),
                                                 lambda r: r["k"]).items()
    ]  # fmt: skip
    assert canonical(run(sql, rows, crash_every=crash_every)) == canonical(expected)


@SETTINGS
@given(st.lists(row_strategy, max_size=40), st.sampled_from([0, 7]))
def test_cascading_windows_over_window_time(raw: list[Row], crash_every: int) -> None:
    """Flink's cascade: per key and 2-second window (grouped by its ``window_time`` too),
    then the keys' counts summed per 6-second window of those rows' ``window_time``."""
    rows = with_times(raw)
    sql = """
    CREATE VIEW small AS
    SELECT k, COUNT(*) AS c, window_time AS wt
    FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND))
    GROUP BY k, window_start, window_end, window_time;
    CREATE TABLE o (total BIGINT, keys BIGINT, ws TIMESTAMP(3)) WITH ('stream' = 'out');
    INSERT INTO o
    SELECT SUM(c), COUNT(*), window_start
    FROM TABLE(TUMBLE(TABLE small, DESCRIPTOR(wt), INTERVAL '6' SECOND))
    GROUP BY window_start, window_end;
    """
    small = groups(rows, tumbling(2_000), lambda r: r["k"])
    big: dict[int, list[int]] = defaultdict(list)
    for (_, (_, end)), members in small.items():
        big[(end - 1) - (end - 1) % 6_000].append(len(members))
    expected = [{"total": sum(c), "keys": len(c), "ws": ws} for ws, c in big.items()]
    assert canonical(run(sql, rows, crash_every=crash_every)) == canonical(expected)
