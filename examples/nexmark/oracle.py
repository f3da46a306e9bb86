"""The Nexmark queries' answers computed in plain Python, without Millrace: what
``examples/nexmark/__main__.py`` compares each query's output with."""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import fmean
from typing import Any

from examples.nexmark.events import Event

Answer = Any


def answers(events: list[Event]) -> dict[str, Answer]:
    """Every query's answer, in the form ``__main__.result`` gives the outputs."""
    persons = [v for s, v in events if s == "persons"]
    auctions = [v for s, v in events if s == "auctions"]
    bids = [v for s, v in events if s == "bids"]
    by_id = {p["id"]: p for p in persons}
    winners = _winners(auctions, bids)
    return {
        "q0": sorted(_key(b) for b in bids),
        "q1": sorted(_key({**b, "price": b["price"] * 89 // 100}) for b in bids),
        "q2": sorted(_key(b) for b in bids if b["auction"] % 123 == 0),
        "q3": sorted(
            (p["name"], p["city"], p["state"], a["id"])
            for a in auctions
            if a["category"] == 10
            for p in [by_id[a["seller"]]]
            if p["state"] in ("OR", "ID", "CA") and abs(a["dateTime"] - p["dateTime"]) <= 86_400_000
        ),
        "q4": _mean_by(((a["category"], price) for a, price in winners)),
        "q5": _hot_items(bids),
        "q6": _last_ten(winners),
        "q7": _highest(bids),
        "q8": _new_users(auctions, by_id),
        "q11": _sessions(bids),
    }


def _new_users(auctions: list[dict[str, Any]], by_id: dict[int, dict[str, Any]]) -> list[Any]:
    """The persons who opened an auction in the 10 s window they registered in."""
    found = set()
    for a in auctions:
        p = by_id[a["seller"]]
        if p["dateTime"] // 10_000 == a["dateTime"] // 10_000:
            found.add((p["id"], p["name"], p["dateTime"] // 10_000 * 10_000))
    return sorted(found)


def _key(value: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(value.items()))


def _winners(auctions: list[dict[str, Any]], bids: list[dict[str, Any]]) -> list[Any]:
    """Each auction with a bid in ``[dateTime, expires]``, and its highest price."""
    offers = defaultdict(list)
    for b in bids:
        offers[b["auction"]].append(b)
    won = []
    for a in auctions:
        prices = [
            b["price"] for b in offers[a["id"]] if a["dateTime"] <= b["dateTime"] <= a["expires"]
        ]
        if prices:
            won.append((a, max(prices)))
    return won


def _mean_by(pairs: Any) -> dict[int, float]:
    sums: defaultdict[int, list[int]] = defaultdict(list)
    for key, value in pairs:
        sums[key].append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}


def _hot_items(bids: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[int, list[int]]]:
    """Per hopping window (10 s, every 2 s): the highest bid count and its auctions."""
    counts: defaultdict[tuple[int, int], Counter[int]] = defaultdict(Counter)
    for b in bids:
        t = b["dateTime"]
        last_start = t - t % 2_000
        for start in range(last_start, t - 10_000, -2_000):
            counts[(start, start + 10_000)][b["auction"]] += 1
    hot = {}
    for window, per_auction in counts.items():
        top = max(per_auction.values())
        hot[window] = (top, sorted(a for a, n in per_auction.items() if n == top))
    return hot


def _last_ten(winners: list[Any]) -> dict[int, float]:
    """Per seller, the mean winning price of their 10 last-closing auctions (ties with
    the 10th included)."""
    sales: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)
    for a, price in winners:
        sales[a["seller"]].append((a["expires"], price))
    result = {}
    for seller, items in sales.items():
        items.sort(reverse=True)
        kept = [i for i in items if i[0] >= items[min(len(items), 10) - 1][0]]
        result[seller] = fmean(p for _, p in kept)
    return result


def _highest(bids: list[dict[str, Any]]) -> dict[int, list[Any]]:
    windows: defaultdict[int, list[dict[str, Any]]] = defaultdict(list)
    for b in bids:
        windows[b["dateTime"] - b["dateTime"] % 10_000].append(b)
    return {
        start: sorted(_key(b) for b in found if b["price"] == max(x["price"] for x in found))
        for start, found in windows.items()
    }


def _sessions(bids: list[dict[str, Any]]) -> list[tuple[int, int, int, int]]:
    """``(bidder, start, end, bids)`` per session: a gap of 10 s or more ends one."""
    times: defaultdict[int, list[int]] = defaultdict(list)
    for b in bids:
        times[b["bidder"]].append(b["dateTime"])
    sessions = []
    for bidder, found in times.items():
        found.sort()
        start = last = found[0]
        count = 0
        for t in found:
            if t >= last + 10_000:
                sessions.append((bidder, start, last + 10_000, count))
                start, count = t, 0
            last, count = t, count + 1
        sessions.append((bidder, start, last + 10_000, count))
    return sorted(sessions)
