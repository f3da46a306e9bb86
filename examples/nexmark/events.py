"""A small, deterministic Nexmark event stream: persons, auctions and bids.

Nexmark's proportions (1 person : 3 auctions : 46 bids), ids that grow with time,
bids concentrated on a few hot auctions, auctions open 2-20 s. Every event's event
time is its ``dateTime``; they come in time order.
"""

from __future__ import annotations

import random
from typing import Any

T0 = 1_700_000_000_000
STATES = ("OR", "ID", "CA", "WA", "NY", "TX")
CITIES = ("Portland", "Boise", "Fresno", "Seattle", "Albany", "Austin")

Event = tuple[str, dict[str, Any]]
"""``(stream, value)``: ``persons``, ``auctions`` or ``bids``."""


def generate(events: int = 3_000, seed: int = 7) -> list[Event]:
    """``events`` events, 100 ms apart on average."""
    rng = random.Random(seed)
    out: list[Event] = []
    persons: list[int] = []
    auctions: list[int] = []
    t = T0
    for n in range(events):
        t += rng.randrange(0, 200)
        kind = n % 50
        if kind == 0 or not persons:
            pid = 1000 + len(persons)
            persons.append(pid)
            state = rng.choice(STATES)
            out.append(
                (
                    "persons",
                    {
                        "id": pid,
                        "name": f"person{pid}",
                        "state": state,
                        "city": CITIES[STATES.index(state)],
                        "dateTime": t,
                    },
                )
            )
        elif kind <= 3 or not auctions:
            aid = 1000 + len(auctions)
            auctions.append(aid)
            out.append(("auctions", {
                "id": aid, "seller": rng.choice(persons[-20:]), "category": rng.randrange(10, 14),
                "initialBid": rng.randrange(10, 100), "dateTime": t,
                "expires": t + rng.randrange(2_000, 20_000),
            }))  # fmt: skip
        else:
            hot = rng.random() < 0.5
            auction = auctions[-1] if hot else rng.choice(auctions[-30:])
            out.append(
                (
                    "bids",
                    {
                        "auction": auction,
                        "bidder": rng.choice(persons),
                        "price": rng.randrange(100, 2_000),
                        "dateTime": t,
                    },
                )
            )
    return out
