"""Nexmark q0-q8 and q11 on the ``dataflow`` library: each query is a function giving
its computations (what a topology file's ``[computations]`` holds) and the few
functions they name, under 25 lines of Python each (docstrings aside; q4 and q6
share :func:`winning_bids`). Every query writes its result to the stream ``out``.

The streams are ``persons``, ``auctions`` and ``bids`` (``examples/nexmark/events.py``).
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Any

from millrace.computations import Record

M = __name__
Computations = dict[str, dict[str, Any]]


def op(handler: str, inputs: dict[str, str], output: str, **params: Any) -> dict[str, Any]:
    """One computation: ``dataflow:<handler>`` reading ``inputs``, writing ``output``."""
    params = {"output": output, **params}
    return {"handler": f"dataflow:{handler}", "inputs": inputs, "outputs": [output],
            "params": params}  # fmt: skip


def q0() -> Computations:
    """Pass-through: every bid."""
    return {"q0": op("Map", {"bids": "json:auction"}, "out", fn=f"{M}:same")}


def same(record: Record) -> bytes:
    return record.value


def q1() -> Computations:
    """Currency conversion: each bid's price in euros."""
    return {"q1": op("Map", {"bids": "json:auction"}, "out", fn=f"{M}:in_euros")}


def in_euros(record: Record) -> dict[str, Any]:
    bid = json.loads(record.value)
    return {**bid, "price": bid["price"] * 89 // 100}


def q2() -> Computations:
    """Selection: the bids on every 123rd auction."""
    return {"q2": op("Filter", {"bids": "json:auction"}, "out", fn=f"{M}:chosen_auction")}


def chosen_auction(record: Record) -> bool:
    return bool(json.loads(record.value)["auction"] % 123 == 0)


def q3() -> Computations:
    """Local item suggestion: the category-10 auctions of sellers in OR, ID or CA (a
    person's id is its key: ``left_unique``)."""
    return {
        "q3": op("IntervalJoin", {"persons": "json:id", "auctions": "json:seller"}, "out",
                 left="persons", right="auctions", ttl_ms="1d", left_unique=True,
                 where=f"{M}:local_item", select=f"{M}:suggestion"),
    }  # fmt: skip


def local_item(person: Record, auction: Record) -> bool:
    p, a = json.loads(person.value), json.loads(auction.value)
    return p["state"] in ("OR", "ID", "CA") and a["category"] == 10


def suggestion(person: Record, auction: Record) -> dict[str, Any]:
    p, a = json.loads(person.value), json.loads(auction.value)
    return {"name": p["name"], "city": p["city"], "state": p["state"], "auction": a["id"]}


def winning_bids() -> Computations:
    """The highest bids of each auction made before it expires (q4 and q6 start so); an
    auction's id is its key (``left_unique``): a bid that meets its auction is not kept."""
    join = {"auctions": "json:id", "bids": "json:auction"}
    return {"offers": op("IntervalJoin", join, "offers", left="auctions", right="bids",
                         lower_ms=0, upper_ms="20s", left_until="expires", left_unique=True,
                         select=f"{M}:offer"),
            "winner": op("WindowedAggregation", {"offers": "key"}, "winners",
                         window="field:opened:closes", aggregate="max_by:price")}  # fmt: skip


def offer(auction: Record, bid: Record) -> dict[str, Any]:
    a, b = json.loads(auction.value), json.loads(bid.value)
    return {"category": a["category"], "seller": a["seller"], "price": b["price"],
            "opened": a["dateTime"], "closes": a["expires"] + 1}  # fmt: skip


def q4() -> Computations:
    """Average winning price per category."""
    return {**winning_bids(),
            "categories": op("Map", {"winners": "key"}, "prices", fn=f"{M}:by_category"),
            "q4": op("WindowedAggregation", {"prices": "key"}, "out", window="global",
                     aggregate="mean", field="price")}  # fmt: skip


def by_category(record: Record) -> Record:
    won = json.loads(record.value)["value"][0]
    return Record(
        "p", str(won["category"]).encode(), json.dumps(won).encode(), record.event_time_ms
    )


def q5() -> Computations:
    """Hot items: per 10 s window sliding by 2 s, the auctions with the most bids."""
    return {
        "bid_counts": op("WindowedAggregation", {"bids": "json:auction"}, "counts",
                         window="hopping:10s:2s", aggregate="count"),
        "q5": op("WindowedAggregation", {"counts": "json:window"}, "out",
                 window="tumbling:2s", aggregate="top_n:1:value"),
    }  # fmt: skip


def q6() -> Computations:
    """Average selling price per seller, over the seller's last 10 closed auctions."""
    return {**winning_bids(),
            "sellers": op("Map", {"winners": "key"}, "sales", fn=f"{M}:by_seller"),
            "last_ten": op("WindowedAggregation", {"sales": "key"}, "recent", window="global",
                           aggregate="top_n:10:closes"),
            "q6": op("Map", {"recent": "key"}, "out", fn=f"{M}:average_price")}  # fmt: skip


def by_seller(record: Record) -> Record:
    won = json.loads(record.value)["value"][0]
    return Record("s", b"%d" % won["seller"], json.dumps(won).encode(), record.event_time_ms)


def average_price(record: Record) -> dict[str, Any]:
    pane = json.loads(record.value)
    return {"seller": int(pane["key"]), "average": fmean(s["price"] for s in pane["value"])}


def q7() -> Computations:
    """Highest bid: per 10 s window, the bids with the highest price."""
    return {"q7": op("WindowedAggregation", {"bids": f"py:{M}:one_key"}, "out",
                     window="tumbling:10s", aggregate="max_by:price")}  # fmt: skip


def one_key(key: bytes, value: bytes) -> bytes:
    return b"all"


def q8() -> Computations:
    """Monitor new users: the persons who opened an auction in the 10 s window they
    registered in."""
    return {
        "sellers": op("IntervalJoin", {"persons": "json:id", "auctions": "json:seller"},
                      "seen", left="persons", right="auctions", lower_ms="-10s",
                      upper_ms="10s", left_unique=True, where=f"{M}:same_window",
                      select=f"{M}:new_user"),
        "q8": op("Dedup", {"seen": "key"}, "out", within_ms="1d"),
    }  # fmt: skip


def same_window(person: Record, auction: Record) -> bool:
    return person.event_time_ms // 10_000 == auction.event_time_ms // 10_000


def new_user(person: Record, auction: Record) -> dict[str, Any]:
    p = json.loads(person.value)
    return {"id": p["id"], "name": p["name"], "window": p["dateTime"] // 10_000 * 10_000}


def q11() -> Computations:
    """User sessions: bids per bidder per session (10 s of inactivity ends one)."""
    return {"q11": op("WindowedAggregation", {"bids": "json:bidder"}, "out",
                      window="session:10s", aggregate="count")}  # fmt: skip


QUERIES = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7,
           "q8": q8, "q11": q11}  # fmt: skip
