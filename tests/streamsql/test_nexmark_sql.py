"""The Nexmark queries in the nexmark project's Flink SQL (``examples/nexmark/sql/``),
planned by ``millrace.streamsql`` and run by the node's engine in ``TestHarness``
(crashing and resuming too), against answers computed here in plain Python."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from examples.nexmark.events import Event, generate
from tests.streamsql._run import sql_outputs

SQL = Path(__file__).resolve().parents[2] / "examples" / "nexmark" / "sql"
EVENTS = generate()


def run_sql(query: str, events: list[Event], *, crash_every: int = 0) -> list[dict[str, Any]]:
    """The rows the query writes to ``out`` once the whole input is processed."""
    sql = (SQL / "ddl.sql").read_text() + (SQL / f"{query}.sql").read_text()
    feeds = [(stream, value, value["dateTime"]) for stream, value in events]
    return sql_outputs(sql, feeds, crash_every=crash_every)


def bids(events: list[Event]) -> list[dict[str, Any]]:
    return [value for stream, value in events if stream == "bids"]


def rows(values: list[dict[str, Any]]) -> list[tuple[tuple[str, Any], ...]]:
    return sorted(tuple(v.items()) for v in values)


def sessions(bids: list[dict[str, Any]], gap: int) -> list[dict[str, Any]]:
    """Per bidder, runs of bids each within ``gap`` of the one before (Flink's sessions:
    a bid exactly ``gap`` after the last one still joins)."""
    times: dict[int, list[int]] = defaultdict(list)
    for b in bids:
        times[b["bidder"]].append(b["dateTime"])
    found = []
    for bidder, ts in times.items():
        ts.sort()
        start, last, count = ts[0], ts[0], 0
        for t in ts:
            if t > last + gap:
                found.append({"bidder": bidder, "bid_count": count, "starttime": start,
                              "endtime": last + gap})  # fmt: skip
                start, count = t, 0
            last, count = t, count + 1
        found.append({"bidder": bidder, "bid_count": count, "starttime": start,
                      "endtime": last + gap})  # fmt: skip
    return found


@pytest.mark.parametrize("crash_every", [0, 97])
def test_q0_passes_every_bid_through(crash_every: int) -> None:
    expected = [{k: b.get(k) for k in ("auction", "bidder", "price", "dateTime", "extra")}
                for b in bids(EVENTS)]  # fmt: skip
    assert rows(run_sql("q0", EVENTS, crash_every=crash_every)) == rows(expected)


def test_q1_converts_prices_to_decimal_euros() -> None:
    expected = [
        {"auction": b["auction"], "bidder": b["bidder"],
         "price": round(b["price"] * 908 / 1000, 3), "dateTime": b["dateTime"], "extra": None}
        for b in bids(EVENTS)
    ]  # fmt: skip
    assert rows(run_sql("q1", EVENTS)) == rows(expected)


def test_q2_selects_every_123rd_auction() -> None:
    expected = [{"auction": b["auction"], "price": b["price"]} for b in bids(EVENTS)
                if b["auction"] % 123 == 0]  # fmt: skip
    got = run_sql("q2", EVENTS)
    assert got and rows(got) == rows(expected)


@pytest.mark.parametrize("crash_every", [0, 61])
def test_q11_counts_each_bidders_sessions(crash_every: int) -> None:
    got = run_sql("q11", EVENTS, crash_every=crash_every)
    assert rows(got) == rows(sessions(bids(EVENTS), 10_000))


def of(stream: str, events: list[Event]) -> list[dict[str, Any]]:
    return [value for s, value in events if s == stream]


def window_of(t: int, size: int) -> int:
    return t - t % size


@pytest.mark.parametrize("crash_every", [0, 83])
def test_q3_joins_local_sellers_to_their_category_10_auctions(crash_every: int) -> None:
    persons = {p["id"]: p for p in of("persons", EVENTS)}
    expected = [
        {"name": p["name"], "city": p["city"], "state": p["state"], "id": a["id"]}
        for a in of("auctions", EVENTS)
        for p in [persons[a["seller"]]]
        if a["category"] == 10 and p["state"] in ("OR", "ID", "CA")
        and abs(a["dateTime"] - p["dateTime"]) <= 86_400_000  # the SET state TTL
    ]  # fmt: skip
    got = run_sql("q3", EVENTS, crash_every=crash_every)
    assert got and rows(got) == rows(expected)


@pytest.mark.parametrize("crash_every", [0, 71])
def test_q5_finds_the_auctions_with_the_most_bids_per_sliding_window(crash_every: int) -> None:
    counts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for b in bids(EVENTS):
        last = window_of(b["dateTime"], 2_000)
        for start in range(last - 8_000, last + 1, 2_000):
            counts[start][b["auction"]] += 1
    expected = [
        {"auction": auction, "num": n}
        for per_auction in counts.values()
        for auction, n in per_auction.items()
        if n >= max(per_auction.values())
    ]
    got = run_sql("q5", EVENTS, crash_every=crash_every)
    assert got and rows(got) == rows(expected)


def test_q7_finds_the_highest_bids_of_each_window() -> None:
    highest: dict[int, int] = defaultdict(int)
    for b in bids(EVENTS):
        start = window_of(b["dateTime"], 10_000)
        highest[start + 10_000] = max(highest[start + 10_000], b["price"])
    expected = [
        # The project's text SELECTs price before bidder into (auction, bidder, price, ...).
        {"auction": b["auction"], "bidder": b["price"], "price": b["bidder"],
         "dateTime": b["dateTime"], "extra": None}
        for end, top in highest.items()
        for b in bids(EVENTS)
        if b["price"] == top and end - 10_000 <= b["dateTime"] <= end
    ]  # fmt: skip
    got = run_sql("q7", EVENTS)
    assert got and rows(got) == rows(expected)


@pytest.mark.parametrize("crash_every", [0, 59])
def test_q8_finds_new_users_who_opened_an_auction_in_their_first_window(
    crash_every: int,
) -> None:
    sellers = {(a["seller"], window_of(a["dateTime"], 10_000)) for a in of("auctions", EVENTS)}
    expected = {
        (p["id"], p["name"], window_of(p["dateTime"], 10_000))
        for p in of("persons", EVENTS)
        if (p["id"], window_of(p["dateTime"], 10_000)) in sellers
    }
    got = run_sql("q8", EVENTS, crash_every=crash_every)
    assert got and rows(got) == rows([{"id": i, "name": n, "stime": s} for i, n, s in expected])


def latest(changelog: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    """The table an updating stream's rows leave (Flink's row kinds in ``$op``)."""
    table: dict[Any, dict[str, Any]] = {}
    for row in changelog:
        op = row.pop("$op")
        if op in ("+I", "+U"):
            table[row[key]] = row
        else:
            assert table.pop(row[key]) == row, "a retraction takes back the row written"
    return table


@pytest.mark.parametrize("crash_every", [0, 89])
def test_q4_averages_each_categorys_winning_bids(crash_every: int) -> None:
    auctions = {a["id"]: a for a in of("auctions", EVENTS)}
    winning: dict[int, int] = {}
    for b in bids(EVENTS):
        a = auctions.get(b["auction"])
        if a is not None and a["dateTime"] <= b["dateTime"] <= a["expires"]:
            winning[a["id"]] = max(winning.get(a["id"], 0), b["price"])
    per_category: dict[int, list[int]] = defaultdict(list)
    for auction, final in winning.items():
        per_category[auctions[auction]["category"]].append(final)
    expected = {c: {"id": c, "final": int(sum(f) / len(f))} for c, f in per_category.items()}
    assert latest(run_sql("q4", EVENTS, crash_every=crash_every), "id") == expected
