"""The Nexmark queries' answers in SQL's semantics, computed in plain Python from the
events (``examples/nexmark/events.py``), and the outputs put in the same form: what
the SQL tests compare (in the node's engine, on a cluster, in a backfill)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from examples.nexmark.events import Event

Row = dict[str, Any]
QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q11")
"""The Nexmark queries that run as SQL."""
UPDATING = {"q4": "id", "q6": None}
"""The queries whose rows update their result, and the column keying it (None: the
rows themselves, taken back by content)."""


def of(stream: str, events: list[Event]) -> list[Row]:
    return [value for s, value in events if s == stream]


def window_of(t: int, size: int) -> int:
    return t - t % size


def rows(values: list[Row]) -> list[str]:
    """Rows in a form to compare: each's canonical JSON, sorted."""
    return sorted(json.dumps(v, sort_keys=True) for v in values)


def latest(changelog: list[Row], key: str) -> dict[Any, Row]:
    """The table an updating stream's rows leave (Flink's row kinds in ``$op``)."""
    table: dict[Any, Row] = {}
    for written in changelog:
        row = dict(written)
        op = row.pop("$op")
        if op in ("+I", "+U"):
            table[row[key]] = row
        else:
            assert table.pop(row[key]) == row, "a retraction takes back the row written"
    return table


def remaining(changelog: list[Row]) -> list[str]:
    """The rows an updating stream leaves when each retraction (``-U``, ``-D``) takes
    back one row of the same content, as :func:`rows` gives them."""
    table: Counter[str] = Counter()
    for written in changelog:
        row = dict(written)
        text = json.dumps(row, sort_keys=True) if row.pop("$op") in ("+I", "+U") else None
        if text is None:
            taken = json.dumps(row, sort_keys=True)
            assert table[taken] > 0, "a retraction takes back a row written"
            table[taken] -= 1
        else:
            table[text] += 1
    return sorted(table.elements())


def result(query: str, outputs: list[Row]) -> Any:
    """A query's outputs in the form :func:`answer` gives."""
    if query not in UPDATING:
        return rows(outputs)
    key = UPDATING[query]
    return remaining(outputs) if key is None else latest(outputs, key)


def answer(query: str, events: list[Event]) -> Any:
    """The query's answer over ``events``."""
    found = _ANSWERS[query](events)
    return found if query == "q4" else rows(found)


def _q0(events: list[Event]) -> list[Row]:
    fields = ("auction", "bidder", "price", "dateTime", "extra")
    return [{k: b.get(k) for k in fields} for b in of("bids", events)]


def _q1(events: list[Event]) -> list[Row]:
    return [
        {"auction": b["auction"], "bidder": b["bidder"],
         "price": round(b["price"] * 908 / 1000, 3), "dateTime": b["dateTime"], "extra": None}
        for b in of("bids", events)
    ]  # fmt: skip


def _q2(events: list[Event]) -> list[Row]:
    return [{"auction": b["auction"], "price": b["price"]} for b in of("bids", events)
            if b["auction"] % 123 == 0]  # fmt: skip


def _q3(events: list[Event]) -> list[Row]:
    persons = {p["id"]: p for p in of("persons", events)}
    return [
        {"name": p["name"], "city": p["city"], "state": p["state"], "id": a["id"]}
        for a in of("auctions", events)
        for p in [persons[a["seller"]]]
        if a["category"] == 10 and p["state"] in ("OR", "ID", "CA")
        and abs(a["dateTime"] - p["dateTime"]) <= 86_400_000  # the SET state TTL
    ]  # fmt: skip


def _winning_bids(events: list[Event]) -> tuple[dict[int, Row], dict[int, int]]:
    """The auctions by id, and each one's highest bid made while it was open."""
    auctions = {a["id"]: a for a in of("auctions", events)}
    winning: dict[int, int] = {}
    for b in of("bids", events):
        a = auctions.get(b["auction"])
        if a is not None and a["dateTime"] <= b["dateTime"] <= a["expires"]:
            winning[a["id"]] = max(winning.get(a["id"], 0), b["price"])
    return auctions, winning


def _q4(events: list[Event]) -> dict[Any, Row]:
    auctions, winning = _winning_bids(events)
    per_category: dict[int, list[int]] = defaultdict(list)
    for auction, final in winning.items():
        per_category[auctions[auction]["category"]].append(final)
    return {c: {"id": c, "final": int(sum(f) / len(f))} for c, f in per_category.items()}


def _q6(events: list[Event]) -> list[Row]:
    """Each auction's best bid while it was open (the highest price; among equal ones the
    row whose canonical JSON text sorts first, as the plan ranks them), then per seller in
    the order of those bids' times (ties by the row's text too) the average price of the
    bid and the 10 before it."""
    auctions = {a["id"]: a for a in of("auctions", events)}
    best: dict[int, Row] = {}
    for b in of("bids", events):
        a = auctions.get(b["auction"])
        if a is None or not a["dateTime"] <= b["dateTime"] <= a["expires"]:
            continue
        row = {"id": a["id"], "seller": a["seller"], "price": b["price"],
               "dateTime": b["dateTime"]}  # fmt: skip
        kept = best.get(a["id"])
        if kept is None or (-row["price"], _text(row)) < (-kept["price"], _text(kept)):
            best[a["id"]] = row
    per_seller: dict[int, list[Row]] = defaultdict(list)
    for row in best.values():
        per_seller[row["seller"]].append({**row, "rownum": 1})
    found = []
    for seller, won in per_seller.items():
        won.sort(key=lambda r: (r["dateTime"], _text(r)))
        for i in range(len(won)):
            frame = [r["price"] for r in won[max(0, i - 10) : i + 1]]
            found.append({"seller": str(seller), "avg_price": int(sum(frame) / len(frame))})
    return found


def _text(row: Row) -> str:
    """A row's canonical JSON text, as the plan orders ties by it."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"))


def _q5(events: list[Event]) -> list[Row]:
    counts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for b in of("bids", events):
        last = window_of(b["dateTime"], 2_000)
        for start in range(last - 8_000, last + 1, 2_000):
            counts[start][b["auction"]] += 1
    return [
        {"auction": auction, "num": n}
        for per_auction in counts.values()
        for auction, n in per_auction.items()
        if n >= max(per_auction.values())
    ]


def _q7(events: list[Event]) -> list[Row]:
    highest: dict[int, int] = defaultdict(int)
    for b in of("bids", events):
        end = window_of(b["dateTime"], 10_000) + 10_000
        highest[end] = max(highest[end], b["price"])
    return [
        # The project's text SELECTs price before bidder into (auction, bidder, price, ...).
        {"auction": b["auction"], "bidder": b["price"], "price": b["bidder"],
         "dateTime": b["dateTime"], "extra": None}
        for end, top in highest.items()
        for b in of("bids", events)
        if b["price"] == top and end - 10_000 <= b["dateTime"] <= end
    ]  # fmt: skip


def _q8(events: list[Event]) -> list[Row]:
    sellers = {(a["seller"], window_of(a["dateTime"], 10_000)) for a in of("auctions", events)}
    found = {
        (p["id"], p["name"], window_of(p["dateTime"], 10_000))
        for p in of("persons", events)
        if (p["id"], window_of(p["dateTime"], 10_000)) in sellers
    }
    return [{"id": i, "name": n, "stime": s} for i, n, s in found]


def _q11(events: list[Event]) -> list[Row]:
    """Per bidder, runs of bids each within 10 s of the one before (Flink's sessions: a
    bid exactly 10 s after the last one still joins)."""
    gap = 10_000
    times: dict[int, list[int]] = defaultdict(list)
    for b in of("bids", events):
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


_ANSWERS: dict[str, Callable[[list[Event]], Any]] = {
    "q0": _q0, "q1": _q1, "q2": _q2, "q3": _q3, "q4": _q4, "q5": _q5, "q6": _q6, "q7": _q7,
    "q8": _q8,
    "q11": _q11,
}  # fmt: skip
