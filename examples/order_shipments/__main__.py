"""Run the order-shipments example in ``TestHarness`` and check it.

    python -m examples.order_shipments

1. generates a day of orders and their shipments: most ship once within the day,
   some in two parcels, one ships after 30 hours, one never; events arrive up to
   40 minutes out of order, one order 4 hours late (after its own shipment), and
   one shipment 2 days late, past the allowed lateness;
2. feeds them in arrival order with a watermark 30 minutes behind the newest event,
   then moves the watermark past the last day, so unshipped orders come out;
3. prints each order's shipments and checks the join against a nested loop over
   the same events (without the one past the allowed lateness, which must be on
   ``late_events``).

Exit code 0 only when both checks pass.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from millrace.computations import Topology
from millrace.computations.testing import TestHarness

TOPOLOGY = Path(__file__).with_name("topology.toml")
START_MS = 1_714_521_600_000  # 2024-05-01 00:00 UTC
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
OUT_OF_ORDERNESS_MS = 30 * MINUTE_MS
FATES = ["one", "one", "split", "one", "after 30 h", "one", "never", "one", "split", "one"]
"""What happens to each order, in order."""


@dataclass(frozen=True, slots=True)
class Event:
    stream: str
    key: str
    value: dict[str, Any]
    event_time_ms: int
    arrives_ms: int
    """When it reaches the pipeline (on the event-time axis)."""


def generate(seed: int = 5) -> tuple[list[Event], Event]:
    """Orders and shipments in arrival order, and the shipment past the allowed lateness."""
    rng = random.Random(seed)
    events: list[Event] = []

    def add(stream: str, key: str, value: dict[str, Any], t: int, delay: int | None) -> Event:
        arrives = t + (rng.randrange(40 * MINUTE_MS) if delay is None else delay)
        events.append(Event(stream, key, value, t, arrives))
        return events[-1]

    parcels = 0
    unshipped, unshipped_t = "", START_MS
    for number, fate in enumerate(FATES):
        order = f"o{number + 1}"
        t = START_MS + number * 90 * MINUTE_MS + rng.randrange(30 * MINUTE_MS)
        stuck = number == 3  # its order service's outbox was stuck for 4 hours
        item = rng.choice(["tea", "mugs", "kettle"])
        add("orders", order, {"order": order, "item": item}, t, 4 * HOUR_MS if stuck else None)
        for _ in range({"one": 1, "split": 2, "after 30 h": 1, "never": 0}[fate]):
            parcels += 1
            if fate == "after 30 h":
                after = 30 * HOUR_MS
            elif stuck:
                after = 150 * MINUTE_MS  # shipped, and its event in, before the order's
            else:
                after = rng.randrange(HOUR_MS, 20 * HOUR_MS)
            carrier = rng.choice(["DHL", "UPS"])
            parcel = {"order": order, "parcel": f"p{parcels}", "carrier": carrier}
            add("shipments", f"p{parcels}", parcel, t + after, None)
        if fate == "never":
            unshipped, unshipped_t = order, t
    lost = {"order": unshipped, "parcel": "p-lost", "carrier": "DHL"}
    too_late = add("shipments", "p-lost", lost, unshipped_t + 3 * HOUR_MS, 2 * DAY_MS)
    events.sort(key=lambda event: event.arrives_ms)
    return events, too_late


def nested_loop(events: list[Event]) -> set[tuple[str, str | None]]:
    """(order, parcel) for every shipment within a day of its order, and (order, None)
    for every order with none."""
    orders = [e for e in events if e.stream == "orders"]
    shipments = [e for e in events if e.stream == "shipments"]
    pairs: set[tuple[str, str | None]] = {
        (o.key, s.value["parcel"])
        for o in orders
        for s in shipments
        if s.value["order"] == o.key
        and o.event_time_ms <= s.event_time_ms <= o.event_time_ms + DAY_MS
    }
    shipped = {order for order, _ in pairs}
    return pairs | {(o.key, None) for o in orders if o.key not in shipped}


def run(events: list[Event]) -> TestHarness:
    """Feed the events in arrival order, the watermark trailing the newest one; then end
    the input, so every order's day is over."""
    harness = TestHarness(Topology.load(TOPOLOGY))
    newest = START_MS
    for event in events:
        value = json.dumps(event.value).encode()
        harness.feed(event.stream, event.key.encode(), value, event.event_time_ms)
        newest = max(newest, event.event_time_ms)
        harness.advance_watermark(newest - OUT_OF_ORDERNESS_MS)
    harness.advance_watermark(newest + 2 * DAY_MS)
    return harness


def main() -> int:
    events, too_late = generate()
    position = {event.key: n for n, event in enumerate(events)}
    relative = "after" if position["o4"] > position["p5"] else "before"
    print(
        f"{len(events)} events; order o4 arrives 4 h late, {relative} its shipment p5; "
        "shipment p-lost arrives 2 days late"
    )
    harness = run(events)
    joined: set[tuple[str, str | None]] = set()
    lines: defaultdict[str, list[tuple[float, str]]] = defaultdict(list)
    for record in harness.outputs("orders_shipped"):
        body = json.loads(record.value)
        order = body["left"]["value"]["order"]  # values come parsed (join output version 2)
        if body["right"] is None:
            joined.add((order, None))
            lines[order].append((0, "not shipped within a day"))
            continue
        shipment = body["right"]["value"]
        joined.add((order, shipment["parcel"]))
        hours = (body["right"]["t"] - body["left"]["t"]) / HOUR_MS
        lines[order].append(
            (hours, f"{shipment['parcel']} by {shipment['carrier']} {hours:.1f} h later")
        )
    print("orders and their shipments within a day:")
    for order in sorted(lines, key=lambda name: int(name[1:])):
        print(f"  {order:<4} {'; '.join(text for _, text in sorted(lines[order]))}")
    late = [json.loads(record.value) for record in harness.outputs("late_events")]
    print(f"late_events: {late} (past the allowed lateness: joins nothing)")

    expected = nested_loop([e for e in events if e != too_late])
    if joined != expected:
        print(f"FAILED: the join gave {joined}, a nested loop over the events {expected}")
        return 1
    if late != [too_late.value]:
        print(f"FAILED: late_events holds {late}, expected only {too_late.value}")
        return 1
    print(f"OK: {len(joined)} results, equal to a nested loop over the events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
