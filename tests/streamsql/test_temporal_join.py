"""``s JOIN t FOR SYSTEM_TIME AS OF s.ts``: each order meets its user's row as of the
order's event time (upserts and deletes of a changelog table, in JSON rows or Debezium
envelopes), inner and left, with the watermark following the input and crashes,
against the version lookup computed here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness
from millrace.streamsql import SqlError, compile_sql

TABLES = """
CREATE TABLE orders (id BIGINT NOT NULL, uid BIGINT NOT NULL, amount BIGINT, ts TIMESTAMP(3),
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('stream' = 'orders');
CREATE TABLE users (id BIGINT, name VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
    WITH ('stream' = 'users', 'format' = '{format}');
CREATE TABLE o (id BIGINT, name VARCHAR, amount BIGINT) WITH ('stream' = 'out');
INSERT INTO o SELECT o.id, u.name, o.amount
FROM orders AS o {how} JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.uid = u.id;
"""
Event = tuple[str, int, Any, int]  # stream, key, row (None: delete), time


def change(uid: int, row: Any, fmt: str) -> bytes:
    if fmt == "json":
        return json.dumps(row).encode()
    if row is None:
        return json.dumps({"op": "d", "before": {"id": uid}, "after": None}).encode()
    return json.dumps({"op": "u", "before": None, "after": row}).encode()


events_strategy = st.lists(
    st.tuples(
        st.booleans(),
        st.integers(0, 2),
        st.one_of(st.none(), st.sampled_from("abc")),
        st.integers(1, 700),
        st.integers(0, 900),
    ),
    max_size=30,
)


def events(raw: list[tuple[bool, int, Any, int, int]]) -> list[Event]:
    """Orders and user changes at growing, distinct times, arriving up to 900 ms out of
    order (in this list's order)."""
    t, out = 10_000, []
    for n, (is_order, uid, name, step, delay) in enumerate(raw):
        t += step
        event: Event
        if is_order:
            event = ("orders", uid, {"id": n, "uid": uid, "amount": n * 10, "ts": t}, t)
        else:
            event = ("users", uid, None if name is None else {"id": uid, "name": name}, t)
        out.append((t + delay, event))
    return [event for _, event in sorted(out, key=lambda arrival: arrival[0])]


def expected(rows: list[Event], left: bool) -> list[dict[str, Any]]:
    found = []
    for stream, uid, row, t in rows:
        if stream != "orders":
            continue
        versions = [(tv, r) for s, k, r, tv in rows if s == "users" and k == uid and tv <= t]
        user = max(versions, key=lambda v: v[0])[1] if versions else None
        if user is not None or left:
            found.append({"id": row["id"], "name": user["name"] if user else None,
                          "amount": row["amount"]})  # fmt: skip
    return found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events_strategy, st.sampled_from(["", "LEFT"]), st.sampled_from(["json", "debezium-json"]),
       st.sampled_from([0, 5]))  # fmt: skip
def test_each_order_meets_its_users_row_as_of_its_time(
    raw: list[Any], how: str, fmt: str, crash_every: int
) -> None:
    rows = events(raw)
    pipeline = compile_sql(TABLES.format(how=how, format=fmt))
    harness = TestHarness(Topology.from_dict(pipeline.topology))
    high = 0
    for i, (stream, uid, row, t) in enumerate(rows, 1):
        high = max(high, t)
        if stream == "orders":
            harness.feed("orders", b"", json.dumps(row).encode(), t)
        else:
            harness.feed(
                "users", str(uid).encode(), change(uid, row, fmt.split("-", maxsplit=1)[0]), t
            )
        if i % 3 == 0:
            harness.run()
            harness.advance_watermark(high - 1_000)  # nothing late: delays < 1 s
        if crash_every and i % crash_every == 0:
            harness.step()
            harness.crash()
    harness.run()
    harness.advance_watermark(MAX_TIME)
    got = [json.loads(r.value) for r in harness.outputs("out")]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(got, key=key) == sorted(expected(rows, how == "LEFT"), key=key)


def test_a_changelog_table_is_read_by_a_temporal_join_only() -> None:
    sql = TABLES.format(how="", format="json").replace(
        "FROM orders AS o  JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.uid = u.id",
        "FROM users AS u, orders AS o",
    )
    with pytest.raises(SqlError, match="changelog table"):
        compile_sql(sql.split("INSERT")[0] + "INSERT INTO o SELECT id, name, id FROM users;")
