"""Run the session-histogram example in ``TestHarness`` and check it.

    python -m examples.session_histogram

1. generates clicks of 30 users in sessions, arriving up to 30 s out of order; some
   arrive 20 minutes late (a phone back online), some of those in the pause between
   two sessions, bridging them; one arrives 90 minutes late, past the allowed lateness;
2. feeds them in arrival order with a watermark 30 s behind the newest click
   (``millrace inject`` and the injector's ``out_of_orderness_ms`` do the same on a
   cluster), crashing the harness halfway;
3. prints the histogram of session lengths and checks it against a plain-Python
   sessionization of every click but the one past the allowed lateness, which must be
   on ``late_clicks``.

Exit code 0 only when both checks pass.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from examples.session_histogram.computations import GAP_MS, MINUTE_MS
from millrace.computations import Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import Pane

TOPOLOGY = Path(__file__).with_name("topology.toml")
START_MS = 1_714_521_600_000  # 2024-05-01 00:00 UTC
OUT_OF_ORDERNESS_MS = 30_000
DELAYED_MS = 20 * MINUTE_MS
TOO_LATE_MS = 90 * MINUTE_MS


@dataclass(frozen=True, slots=True)
class Click:
    user: str
    event_time_ms: int
    arrives_ms: int
    """When it reaches the pipeline (on the event-time axis)."""
    bridging: bool = False
    """Sent in the pause between two sessions of its user: it joins them into one."""


def generate(seed: int = 3, users: int = 30) -> tuple[list[Click], Click]:
    """Clicks in arrival order, and the one that arrives past the allowed lateness."""
    rng = random.Random(seed)
    clicks: list[Click] = []
    for number in range(users):
        user = f"user{number}"
        t = START_MS + rng.randrange(30 * MINUTE_MS)
        for _ in range(rng.randint(2, 5)):  # sessions
            for _ in range(rng.randint(1, 6)):  # clicks 10 s to 2 min apart
                delay = DELAYED_MS if rng.random() < 0.02 else rng.randrange(OUT_OF_ORDERNESS_MS)
                clicks.append(Click(user, t, t + delay))
                last, t = t, t + rng.randrange(10_000, 2 * MINUTE_MS)
            if rng.random() < 0.4:  # a pause of 6 to 9 minutes: one click can bridge it
                pause = rng.randrange(GAP_MS + MINUTE_MS, 2 * GAP_MS - MINUTE_MS)
                if rng.random() < 0.5:
                    bridge = last + pause // 2
                    clicks.append(Click(user, bridge, bridge + DELAYED_MS, bridging=True))
            else:
                pause = rng.randrange(15 * MINUTE_MS, 40 * MINUTE_MS)
            t = last + pause
    first = min(clicks, key=lambda click: click.event_time_ms)
    too_late = Click(first.user, first.event_time_ms + 1, first.event_time_ms + TOO_LATE_MS)
    clicks.append(too_late)
    clicks.sort(key=lambda click: click.arrives_ms)
    return clicks, too_late


def session_lengths(clicks: list[Click]) -> Counter[int]:
    """Sessions per length (clicks per session), sorting each user's clicks: a pause
    of at least ``GAP_MS`` starts a new session."""
    times: defaultdict[str, list[int]] = defaultdict(list)
    for click in clicks:
        times[click.user].append(click.event_time_ms)
    lengths: Counter[int] = Counter()
    for user_times in times.values():
        user_times.sort()
        length = 1
        for previous, t in pairwise(user_times):
            if t - previous >= GAP_MS:
                lengths[length] += 1
                length = 0
            length += 1
        lengths[length] += 1
    return lengths


def run(clicks: list[Click]) -> TestHarness:
    """Feed the clicks in arrival order, the watermark trailing the newest one."""
    harness = TestHarness(Topology.load(TOPOLOGY))
    newest = START_MS
    for number, click in enumerate(clicks):
        value = json.dumps({"user": click.user}).encode()
        harness.feed("clicks", click.user.encode(), value, click.event_time_ms)
        newest = max(newest, click.event_time_ms)
        harness.advance_watermark(newest - OUT_OF_ORDERNESS_MS)
        if number == len(clicks) // 2:
            harness.crash()  # only committed state survives; nothing is lost or doubled
    harness.advance_watermark(newest + GAP_MS)  # every session ends
    return harness


def main() -> int:
    clicks, too_late = generate()
    delayed = sum(1 for c in clicks if c.arrives_ms - c.event_time_ms == DELAYED_MS)
    bridging = sum(1 for c in clicks if c.bridging)
    print(
        f"{len(clicks)} clicks of 30 users; {delayed} arrive 20 min late ({bridging} of them "
        "between two sessions of their user), 1 arrives 90 min late"
    )
    harness = run(clicks)

    buckets: defaultdict[int, list[Pane]] = defaultdict(list)
    for record in harness.outputs("histogram"):
        pane = Pane.decode(record.value)
        buckets[int(pane.key)].append(pane)
    histogram: dict[int, int] = {}
    added = retracted = 0
    for length, updates in buckets.items():
        updates.sort(key=lambda pane: pane.index)  # one pane per session pane or retraction
        values = [0, *(pane.value for pane in updates)]
        added += sum(1 for a, b in pairwise(values) if b > a)
        retracted += sum(1 for a, b in pairwise(values) if b < a)
        if values[-1]:
            histogram[length] = values[-1]
    print("\nsessions per length (clicks per session):")
    for length in sorted(histogram):
        print(f"  {length:>2} {'#' * histogram[length]} {histogram[length]}")
    print(
        f"the histogram applied {added} session panes and {retracted} retractions (late "
        f"clicks that grew or merged sessions): {sum(histogram.values())} sessions, not {added}"
    )

    expected = session_lengths([c for c in clicks if c != too_late])
    late = [(r.key.decode(), r.event_time_ms) for r in harness.outputs("late_clicks")]
    print(f"late_clicks: {late} (past the allowed lateness: never counted)")
    if histogram != dict(expected):
        print(f"FAILED: the histogram is {histogram}, a plain sessionization gives {expected}")
        return 1
    if late != [(too_late.user, too_late.event_time_ms)]:
        print(f"FAILED: late_clicks holds {late}, expected only the 90-minutes-late click")
        return 1
    print("OK: the histogram equals a plain-Python sessionization of the clicks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
