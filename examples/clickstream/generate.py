"""A realistic click-stream and the answers an independent computation gives for it.

Users browse in sessions (a few clicks a few seconds apart, then a pause),
pages follow a skewed popularity, timestamps arrive up to 3 s out of order,
some clicks are submitted twice (a client retry: same batch, same
idempotency key), and a few stragglers arrive minutes late.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

MINUTE_MS = 60_000


def generate(
    seed: int, users: int = 300, sessions: int = 2_500, start_ms: int = 1_700_000_000_000
) -> list[dict[str, Any]]:
    """Clicks in arrival order (with out-of-order timestamps and late stragglers)."""
    rng = random.Random(seed)
    pages = [f"/page/{i}" for i in range(40)]
    weights = [1 / (i + 1) for i in range(len(pages))]
    clicks: list[dict[str, Any]] = []
    span_ms = 10 * MINUTE_MS
    for _ in range(sessions):
        user = f"user{rng.randrange(users)}"
        ts = start_ms + rng.randrange(span_ms)
        for _ in range(rng.randint(1, 8)):
            clicks.append(
                {
                    "key": user,
                    "value": {"user": user, "page": rng.choices(pages, weights)[0]},
                    "ts": ts,
                }
            )
            ts += rng.randint(500, 15_000)
    clicks.sort(key=lambda c: c["ts"] + rng.randint(0, 3_000))  # arrival: up to 3 s out of order
    for _ in range(25):  # stragglers: arrive at the end, minutes behind
        victim = dict(rng.choice(clicks))
        victim = {**victim, "ts": victim["ts"] - rng.randint(2, 6) * MINUTE_MS}
        clicks.append(victim)
    return clicks


def write_jsonl(path: Path, clicks: list[dict[str, Any]]) -> None:
    """One click per line, as ``millrace inject`` and file sources read them."""
    path.write_text("".join(json.dumps(c) + "\n" for c in clicks))


def expected_page_counts(clicks: list[dict[str, Any]]) -> dict[str, int]:
    """``page@window_start`` -> clicks (every click counts: stragglers are corrections)."""
    counts: Counter[str] = Counter()
    for click in clicks:
        start = click["ts"] - click["ts"] % MINUTE_MS
        counts[f"{click['value']['page']}@{start}"] += 1
    return dict(counts)


def expected_top_pages(clicks: list[dict[str, Any]]) -> dict[str, list[list[Any]]]:
    """user -> top 3 ``[page, clicks]`` (ties by page name)."""
    per_user: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for click in clicks:
        per_user[click["key"]][click["value"]["page"]] += 1
    return {
        user: [[p, n] for p, n in sorted(c.items(), key=lambda item: (-item[1], item[0]))[:3]]
        for user, c in per_user.items()
    }
