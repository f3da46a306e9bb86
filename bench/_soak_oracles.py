"""What the soak's sinks must hold, counted as the records are ingested, in bounded
memory (``bench/soak.py``)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from millrace.dataflow import decode_join

MINUTE_MS = 60_000
JOIN_SPAN_MS = 2_000
"""A click joins an impression of its user from up to this long before it."""


@dataclass
class Oracle:
    """What the sinks must hold, counted as the clicks are ingested (in bounded memory)."""

    windows: Counter[str] = field(default_factory=Counter)
    per_user: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    clicks: int = 0

    def add(self, user: str, page: str, ts: int) -> None:
        self.windows[f"{page}@{ts - ts % MINUTE_MS}"] += 1
        self.per_user[user][page] += 1
        self.clicks += 1

    def top_pages(self) -> dict[str, list[list[object]]]:
        """As ``examples.clickstream.generate.expected_top_pages`` ranks them."""
        return {
            user: [[p, n] for p, n in sorted(c.items(), key=lambda item: (-item[1], item[0]))[:3]]
            for user, c in self.per_user.items()
        }


def pair_hash(user: str, impression: tuple[int, str], click: tuple[int, str]) -> int:
    """One joined pair's share of the multiset hash (a sum mod 2^64 of these)."""
    text = json.dumps([user, impression, click]).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


@dataclass
class JoinOracle:
    """The impression-click pairs of the join, counted and hashed as records are
    ingested, keeping each user's records only as long as a later one could pair with
    them (records arrive up to ``slack_ms`` out of order)."""

    slack_ms: int
    pairs: int = 0
    hash_sum: int = 0
    impressions: defaultdict[str, list[tuple[int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    clicks: defaultdict[str, list[tuple[int, str]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def impression(self, user: str, ts: int, value: str) -> None:
        for click in self.clicks[user]:
            if ts <= click[0] <= ts + JOIN_SPAN_MS:
                self._pair(user, (ts, value), click)
        self.impressions[user].append((ts, value))

    def click(self, user: str, ts: int, value: str) -> None:
        for impression in self.impressions[user]:
            if impression[0] <= ts <= impression[0] + JOIN_SPAN_MS:
                self._pair(user, impression, (ts, value))
        self.clicks[user].append((ts, value))

    def forget_before(self, newest_ms: int) -> None:
        """Drop records no record still to come can pair with."""
        horizon = newest_ms - self.slack_ms - JOIN_SPAN_MS
        for book in (self.impressions, self.clicks):
            for user, kept in book.items():
                book[user] = [r for r in kept if r[0] >= horizon]

    def _pair(self, user: str, impression: tuple[int, str], click: tuple[int, str]) -> None:
        self.pairs += 1
        self.hash_sum = (self.hash_sum + pair_hash(user, impression, click)) % 2**64


def joined_pairs(path: Path) -> tuple[int, int]:
    """The number of pairs in the ``ad_clicks`` sink file and their multiset hash."""
    pairs = hash_sum = 0
    lines = path.read_bytes().split(b"\n")[:-1] if path.exists() else []
    for line in lines:  # a line being written is left out
        body = decode_join(json.dumps(json.loads(line)["value"]).encode())  # a JSON value
        left, right = body["left"], body["right"]
        # The records' values were json.dumps of dicts: dumping the parsed ones again
        # gives the same text the oracle hashed.
        share = pair_hash(
            body["key"],
            (left["t"], json.dumps(left["value"])),
            (right["t"], json.dumps(right["value"])),
        )
        pairs += 1
        hash_sum = (hash_sum + share) % 2**64
    return pairs, hash_sum
