"""``dataflow.TableJoin`` over a CDC changelog in the real engine: every record meets
the row its key had when it arrived (replayed against a plain dict), across upserts,
deletes and Debezium envelopes, also after a crash of the harness."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from millrace.computations import Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    AfterWatermark,
    Changelog,
    EveryRecords,
    GlobalWindows,
    Pane,
    Sum,
    TableChanges,
    TableJoin,
    WindowedAggregation,
    parse_change,
)


def topology(handler: str) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"orders": {}, "customers": {}, "enriched": {}},
            "computations": {
                "join": {
                    "handler": handler,
                    "inputs": {"orders": "key", "customers": "key"},
                    "outputs": ["enriched"],
                }
            },
        }
    )


class Enrich(TableJoin):
    stream = "orders"
    table = "customers"
    changelog = Changelog.DEBEZIUM
    how = "left"
    output = "enriched"


def debezium(op: str, after: Any) -> bytes:
    return json.dumps({"payload": {"op": op, "before": None, "after": after}}).encode()


def test_changes_parse_as_upserts_and_debezium_envelopes() -> None:
    assert parse_change(b'{"n": 1}', Changelog.UPSERT) == (False, {"n": 1})
    assert parse_change(b"", Changelog.UPSERT) == (True, None)
    assert parse_change(b"null", Changelog.UPSERT) == (True, None)
    assert parse_change(b"plain", Changelog.UPSERT) == (False, "plain")
    assert parse_change(debezium("r", {"n": 2}), Changelog.DEBEZIUM) == (False, {"n": 2})
    assert parse_change(debezium("d", None), Changelog.DEBEZIUM) == (True, None)
    with pytest.raises(ValueError, match="Debezium"):
        parse_change(b'{"op": "x"}', Changelog.DEBEZIUM)


def test_every_order_meets_the_row_its_customer_had_when_it_arrived() -> None:
    rng = random.Random(7)
    harness = TestHarness(topology(f"{__name__}:Enrich"))
    table: dict[str, Any] = {}
    expected = []
    for step in range(300):
        key = rng.choice(["alice", "bob", "carol"])
        if rng.random() < 0.4:
            op = rng.choice(["c", "u", "u", "d"])
            row = None if op == "d" else {"tier": rng.randrange(5), "step": step}
            harness.feed("customers", key.encode(), debezium(op, row), step)
            if op == "d":
                table.pop(key, None)
            else:
                table[key] = row
        else:
            harness.feed("orders", key.encode(), f"order-{step}".encode(), step)
            expected.append(
                {"v": 2, "key": key, "record_raw": f"order-{step}", "row": table.get(key)}
            )
        harness.run()  # each change or order is processed before the next arrives
        if step == 150:
            harness.crash()  # the table survives in the committed state
            harness.run()
    got = [json.loads(r.value) for r in harness.outputs("enriched")]
    assert got == expected


def test_an_inner_join_drops_orders_without_a_row() -> None:
    class Inner(TableJoin):
        stream = "orders"
        table = "customers"
        output = "enriched"

    globals()["Inner"] = Inner
    harness = TestHarness(topology(f"{__name__}:Inner"))
    harness.feed("orders", b"a", b"early", 1)
    harness.run()
    harness.feed("customers", b"a", b'{"tier": 1}', 2)
    harness.run()
    harness.feed("orders", b"a", b"late", 3)
    harness.run()
    got = [json.loads(r.value) for r in harness.outputs("enriched")]
    assert got == [{"v": 2, "key": "a", "record_raw": "late", "row": {"tier": 1}}]


class Contributions(TableChanges):
    table = "accounts"
    group_by = "region"
    field = "balance"
    output = "contributions"


class RegionTotals(WindowedAggregation):
    window = GlobalWindows()
    aggregate = Sum()
    input_panes = True
    trigger = AfterWatermark(early=EveryRecords(1))
    accumulation = Accumulation.ACCUMULATING
    output = "totals"


def test_an_aggregation_over_a_table_applies_updates_as_retract_and_add() -> None:
    topology = Topology.from_dict(
        {
            "streams": {"accounts": {}, "contributions": {}, "totals": {}},
            "computations": {
                "changes": {
                    "handler": f"{__name__}:Contributions",
                    "inputs": {"accounts": "key"},
                    "outputs": ["contributions"],
                },
                "totals": {
                    "handler": f"{__name__}:RegionTotals",
                    "inputs": {"contributions": "key"},
                    "outputs": ["totals"],
                },
            },
        }
    )
    harness = TestHarness(topology)
    rng = random.Random(11)
    accounts: dict[str, dict[str, Any]] = {}
    for step in range(200):
        account = f"acct{rng.randrange(12)}"
        if rng.random() < 0.2:
            harness.feed("accounts", account.encode(), b"", step)  # a delete
            accounts.pop(account, None)
        else:
            row: dict[str, Any] = {
                "region": rng.choice(["eu", "us", "apac"]),
                "balance": rng.randrange(100),
            }
            harness.feed("accounts", account.encode(), json.dumps(row).encode(), step)
            accounts[account] = row  # an insert, an update, or a move to another region
    harness.run()
    last: dict[bytes, tuple[int, float]] = {}
    for record in harness.outputs("totals"):
        pane = Pane.decode(record.value)
        if pane.index >= last.get(pane.key, (-1, 0))[0]:
            last[pane.key] = (pane.index, pane.value)
    expected: dict[bytes, float] = {}
    for account_row in accounts.values():
        region = account_row["region"].encode()
        expected[region] = expected.get(region, 0) + account_row["balance"]
    assert {k: v for k, (_, v) in last.items() if v} == {k: v for k, v in expected.items() if v}
