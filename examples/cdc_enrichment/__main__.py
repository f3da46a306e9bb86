"""Run the CDC enrichment example in ``TestHarness`` and check it.

    python -m examples.cdc_enrichment

Customers change (Debezium snapshot reads, inserts, updates, a delete) while orders
arrive; each event is processed before the next arrives, and the harness crashes
once on the way. Every order must come out with the row its customer had at that
moment (``null`` before the customer exists and after it is deleted), as a plain
dict replayed in the same order says.

Exit code 0 only when the enriched orders equal that replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from millrace.computations import Topology
from millrace.computations.testing import TestHarness

TOPOLOGY = Path(__file__).with_name("topology.toml")
START_MS = 1_714_521_600_000  # 2024-05-01 00:00 UTC
MINUTE_MS = 60_000

Row = dict[str, Any]
Event = tuple[str, str, dict[str, Any]]
"""(stream, key, value) in arrival order."""


def change(op: str, before: Row | None, after: Row | None) -> Event:
    """A Debezium change event of the customers table, keyed by customer id (``r``
    snapshot read, ``c`` insert, ``u`` update, ``d`` delete)."""
    row = after if after is not None else before
    if row is None:
        raise ValueError("a change has a row before it, after it, or both")
    source = {"connector": "postgresql", "db": "shop", "table": "customers"}
    envelope = {"before": before, "after": after, "source": source, "op": op}
    return "customers", row["id"], {"payload": envelope}


def order(number: int, customer: str, amount: float) -> Event:
    return "orders", f"o{number}", {"order": f"o{number}", "customer": customer, "amount": amount}


ADA = {"id": "c1", "name": "Ada", "tier": "gold"}
BO = {"id": "c2", "name": "Bo", "tier": "silver"}
CY = {"id": "c3", "name": "Cy", "tier": "bronze"}

EVENTS: list[Event] = [
    change("r", None, ADA),  # the connector's initial snapshot
    change("r", None, BO),
    order(1, "c1", 30.00),
    order(2, "c2", 12.50),
    order(3, "c3", 99.00),  # c3 is not in the table yet
    change("c", None, CY),
    order(4, "c3", 45.00),
    change("u", BO, {**BO, "tier": "gold"}),
    order(5, "c2", 80.00),
    change("d", ADA, None),
    order(6, "c1", 5.00),  # c1 was deleted
    change("u", CY, {**CY, "tier": "silver"}),
    order(7, "c3", 20.00),
    order(8, "c2", 7.25),
]
CRASH_AFTER = 8
"""The harness crashes after this many events: the table survives in committed state."""


def replay(events: list[Event]) -> dict[str, Row | None]:
    """order -> its customer's row when it arrived, from a plain dict of rows."""
    table: dict[str, Row] = {}
    rows: dict[str, Row | None] = {}
    for stream, key, value in events:
        if stream == "orders":
            rows[value["order"]] = table.get(value["customer"])
        elif value["payload"]["op"] == "d":
            del table[key]
        else:
            table[key] = value["payload"]["after"]
    return rows


def describe(row: Row | None) -> str:
    return "(no customer row)" if row is None else f"{row['name']}, {row['tier']}"


def main() -> int:
    harness = TestHarness(Topology.load(TOPOLOGY))
    for number, (stream, key, value) in enumerate(EVENTS):
        t = START_MS + number * MINUTE_MS
        harness.feed(stream, key.encode(), json.dumps(value).encode(), t)
        harness.run()  # processed before the next event arrives
        if number + 1 == CRASH_AFTER:
            harness.crash()

    print("in arrival order (customers: Debezium op and row; orders: the row they met):")
    enriched: dict[str, Row | None] = {}
    for record in harness.outputs("enriched_orders"):
        body = json.loads(record.value)
        enriched[body["record"]["order"]] = body["row"]  # the record's value, parsed
    for stream, key, value in EVENTS:
        if stream == "customers":
            op, after = value["payload"]["op"], value["payload"]["after"]
            print(f"  customers {op} {key}: {'deleted' if op == 'd' else describe(after)}")
        else:
            line = f"{value['order']} by {value['customer']}, {value['amount']:6.2f}"
            print(f"  orders    {line} -> {describe(enriched.get(value['order']))}")
    expected = replay(EVENTS)
    if enriched != expected:
        print(f"FAILED: enriched {enriched}, a replay of the changes gives {expected}")
        return 1
    print(f"OK: all {len(enriched)} orders met the customer row a plain replay gives")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
