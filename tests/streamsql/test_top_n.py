"""Top-N (``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)`` with ``WHERE rownum <= N``
around it) over arbitrary rows, with crashes: the N best rows of each window (Window
Top-N), or so far (over no window: an updating result), ranked, ties broken by the
rows' canonical JSON text (so the ranking does not depend on arrival order), against a
plain-Python ranking."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.streamsql import SqlError, compile_sql
from tests.streamsql._nexmark_answers import remaining
from tests.streamsql._nexmark_answers import rows as rows_of
from tests.streamsql._run import sql_outputs

TABLES = """
CREATE TABLE bid (auction BIGINT NOT NULL, price BIGINT NOT NULL, ts TIMESTAMP(3),
                  WATERMARK FOR ts AS ts) WITH ('stream' = 'bids');
"""
Row = dict[str, Any]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def run(sql: str, rows: list[Row], crash_every: int = 0) -> list[Row]:
    feeds = [("bids", row, row["ts"]) for row in rows]
    return sql_outputs(TABLES + sql, feeds, crash_every=crash_every)


rows_strategy = st.lists(
    st.fixed_dictionaries(
        {"auction": st.integers(0, 4), "price": st.integers(0, 9), "ts": st.integers(0, 30_000)}
    ),
    max_size=40,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows_strategy, st.sampled_from([0, 6]), st.sampled_from(["DESC", "ASC"]))
def test_the_best_bids_of_each_window(rows: list[Row], crash_every: int, order: str) -> None:
    sql = f"""
    CREATE TABLE o (ws TIMESTAMP(3), auction BIGINT, price BIGINT, n BIGINT)
        WITH ('stream' = 'out');
    INSERT INTO o
    SELECT window_start, auction, price, rownum FROM (
        SELECT window_start, window_end, auction, price,
               ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                                  ORDER BY price {order}) AS rownum
        FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    ) WHERE rownum <= 3;
    """
    sign = 1 if order == "DESC" else -1
    windows: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        start = r["ts"] - r["ts"] % 10_000
        windows[start].append({"window_start": start, "window_end": start + 10_000,
                               "auction": r["auction"], "price": r["price"],
                               "$score": sign * r["price"]})  # fmt: skip
    expected = []
    for start, items in windows.items():
        items.sort(key=lambda item: (-item["$score"], canonical(item)))
        for rank, item in enumerate(items[:3], 1):
            expected.append({"ws": start, "auction": item["auction"], "price": item["price"],
                             "n": rank})  # fmt: skip
    got = run(sql, rows, crash_every)
    assert sorted(map(canonical, got)) == sorted(map(canonical, expected))


def test_a_top_n_needs_its_limit() -> None:
    inner = ("SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price "
             "DESC) AS rownum FROM bid")  # fmt: skip
    sink = "CREATE TABLE o (a BIGINT, p BIGINT) WITH ('stream' = 'out'); INSERT INTO o "
    with pytest.raises(SqlError, match="needs WHERE rownum <= N"):
        compile_sql(TABLES + sink + f"SELECT auction, price FROM ({inner})")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows_strategy,
    st.sampled_from([0, 5]),
    st.sampled_from(["DESC", "ASC"]),
    st.sampled_from([1, 3]),
)
def test_a_top_n_over_no_window_updates_its_ranking(
    rows: list[Row], crash_every: int, order: str, n: int
) -> None:
    """Flink's Top-N over no window: each auction's n best bids so far, ranked; the rows
    it writes update the result (-D, +I), and the table they leave is the final ranking
    (ties broken by the rows' canonical JSON text)."""
    sql = f"""
    CREATE TABLE o (a BIGINT, p BIGINT, t BIGINT, r BIGINT) WITH ('stream' = 'out');
    INSERT INTO o SELECT auction, price, ts, rownum FROM (
        SELECT auction, price, ts, ROW_NUMBER() OVER (
            PARTITION BY auction ORDER BY price {order}) AS rownum FROM bid
    ) WHERE rownum <= {n};
    """
    sign = -1 if order == "DESC" else 1
    per_auction: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        per_auction[row["auction"]].append(row)
    expected = []
    for bids in per_auction.values():
        bids.sort(key=lambda b: (sign * b["price"], canonical(b)))
        for rank, b in enumerate(bids[:n], 1):
            expected.append({"a": b["auction"], "p": b["price"], "t": b["ts"], "r": rank})
    assert remaining(run(sql, rows, crash_every)) == rows_of(expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows_strategy, st.sampled_from([0, 5]))
def test_the_auctions_with_the_most_bids_of_each_window(rows: list[Row], crash_every: int) -> None:
    sql = """
    CREATE TABLE o (ws TIMESTAMP(3), auction BIGINT, n BIGINT, r BIGINT) WITH ('stream' = 'out');
    INSERT INTO o
    SELECT window_start, auction, n, rownum FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                                     ORDER BY n DESC) AS rownum
        FROM (SELECT window_start, window_end, auction, COUNT(*) AS n
              FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
              GROUP BY window_start, window_end, auction)
    ) WHERE rownum <= 2;
    """
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for r in rows:
        counts[(r["ts"] - r["ts"] % 10_000, r["auction"])] += 1
    windows: dict[int, list[Row]] = defaultdict(list)
    for (start, auction), n in counts.items():
        windows[start].append({"window_start": start, "window_end": start + 10_000,
                               "auction": auction, "n": n, "$score": n})  # fmt: skip
    expected = []
    for start, items in windows.items():
        items.sort(key=lambda item: (-item["$score"], canonical(item)))
        for rank, item in enumerate(items[:2], 1):
            expected.append({"ws": start, "auction": item["auction"], "n": item["n"], "r": rank})
    got = run(sql, rows, crash_every)
    assert sorted(map(canonical, got)) == sorted(map(canonical, expected))
