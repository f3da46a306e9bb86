"""``dataflow.TableTableJoin`` in the real engine: for any arrival order of two
changelogs, each change emits what a replay over two plain dicts emits, and the output,
read back as an upsert changelog, holds the join of the two tables' last rows; the
output feeds a ``TableJoin`` downstream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import Changelog, JoinType, TableJoin, TableTableJoin, parse_change

Change = tuple[str, str, int, Any]  # side ("L"/"R"), key, event time, row (None: delete)
Output = tuple[str, Any, int]  # key, joined row (None: tombstone), event time


def topology(handler: str) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"customers": {}, "accounts": {}, "profiles": {}},
            "computations": {
                "join": {
                    "handler": handler,
                    "inputs": {"customers": "key", "accounts": "key"},
                    "outputs": ["profiles"],
                }
            },
        }
    )


def join_class(how: JoinType) -> str:
    class Profiles(TableTableJoin):
        left = "customers"
        right = "accounts"
        output = "profiles"

    Profiles.how = how
    name = f"Profiles_{how.value}"
    Profiles.__name__ = name
    globals()[name] = Profiles
    return f"{__name__}:{name}"


def feed(harness: TestHarness, change: Change) -> None:
    side, key, t, row = change
    value = b"" if row is None else json.dumps(row).encode()
    harness.feed("customers" if side == "L" else "accounts", key.encode(), value, t)
    harness.run()  # processed before the next change arrives: the arrival order is known


def outputs(harness: TestHarness) -> list[Output]:
    found = []
    for record in harness.outputs("profiles"):
        deleted, row = parse_change(record.value, Changelog.UPSERT)
        found.append((record.key.decode(), None if deleted else row, record.event_time_ms))
    return found


def present(how: JoinType, left: bool, right: bool) -> bool:
    return {
        JoinType.INNER: left and right,
        JoinType.LEFT: left,
        JoinType.RIGHT: right,
        JoinType.FULL: left or right,
    }[how]


def replay(changes: list[Change], how: JoinType) -> list[Output]:
    """What a KTable-KTable join emits for ``changes`` in this order, over two dicts."""
    tables: dict[str, dict[str, tuple[int, Any]]] = {"L": {}, "R": {}}
    emitted: list[Output] = []
    for side, key, t, row in changes:
        mine, theirs = tables[side], tables["R" if side == "L" else "L"]
        if row is None and key not in mine:
            continue
        had = present(how, key in tables["L"], key in tables["R"])
        if row is None:
            del mine[key]
        else:
            mine[key] = (t, row)
        time = max(t, theirs[key][0]) if key in theirs else t
        if present(how, key in tables["L"], key in tables["R"]):
            left, right = (tables[s].get(key, (0, None))[1] for s in ("L", "R"))
            emitted.append((key, {"left": left, "right": right}, time))
        elif had:
            emitted.append((key, None, time))
    return emitted


def final_join(changes: list[Change], how: JoinType) -> dict[str, Any]:
    """The join of the two tables' last rows, key by key."""
    last: dict[str, dict[str, Any]] = {"L": {}, "R": {}}
    for side, key, _, row in changes:
        if row is None:
            last[side].pop(key, None)
        else:
            last[side][key] = row
    keys = set(last["L"]) | set(last["R"])
    return {
        k: {"left": last["L"].get(k), "right": last["R"].get(k)}
        for k in keys
        if present(how, k in last["L"], k in last["R"])
    }


def materialize(found: list[Output]) -> dict[str, Any]:
    """The table an upsert changelog describes."""
    table: dict[str, Any] = {}
    for key, row, _ in found:
        if row is None:
            table.pop(key, None)
        else:
            table[key] = row
    return table


change_strategy = st.tuples(
    st.sampled_from(["L", "R"]),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, 1_000),
    st.one_of(st.none(), st.integers(0, 9).map(lambda n: {"n": n})),
)


@pytest.mark.parametrize("how", list(JoinType))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(change_strategy, max_size=14), crash_at=st.integers(0, 14))
def test_each_change_emits_the_joined_row_of_its_key(
    how: JoinType, changes: list[Change], crash_at: int
) -> None:
    harness = TestHarness(topology(join_class(how)))
    for index, change in enumerate(changes):
        feed(harness, change)
        if index == crash_at:
            harness.crash()  # the tables survive in the committed state
    found = outputs(harness)
    assert found == replay(changes, how)
    assert materialize(found) == final_join(changes, how)


def test_inner_left_and_full_joins_of_one_key() -> None:
    changes: list[Change] = [
        ("L", "k", 1, {"name": "ada"}),
        ("R", "k", 5, {"balance": 10}),
        ("L", "k", 3, {"name": "ada l."}),  # older event time, later arrival: it counts
        ("R", "k", 7, None),
        ("L", "k", 9, None),
        ("L", "k", 10, None),  # deleting what does not exist: nothing
    ]
    expected = {
        JoinType.INNER: [
            ("k", {"left": {"name": "ada"}, "right": {"balance": 10}}, 5),
            ("k", {"left": {"name": "ada l."}, "right": {"balance": 10}}, 5),
            ("k", None, 7),
        ],
        JoinType.LEFT: [
            ("k", {"left": {"name": "ada"}, "right": None}, 1),
            ("k", {"left": {"name": "ada"}, "right": {"balance": 10}}, 5),
            ("k", {"left": {"name": "ada l."}, "right": {"balance": 10}}, 5),
            ("k", {"left": {"name": "ada l."}, "right": None}, 7),
            ("k", None, 9),
        ],
        JoinType.FULL: [
            ("k", {"left": {"name": "ada"}, "right": None}, 1),
            ("k", {"left": {"name": "ada"}, "right": {"balance": 10}}, 5),
            ("k", {"left": {"name": "ada l."}, "right": {"balance": 10}}, 5),
            ("k", {"left": {"name": "ada l."}, "right": None}, 7),
            ("k", None, 9),
        ],
    }
    for how, rows in expected.items():
        harness = TestHarness(topology(join_class(how)))
        for change in changes:
            feed(harness, change)
        assert outputs(harness) == rows, how
        assert [r.value for r in harness.outputs("profiles")][-1] == b"null"


class DebeziumProfiles(TableTableJoin):
    left = "customers"
    right = "accounts"
    left_changelog = Changelog.DEBEZIUM
    how = JoinType.LEFT
    output = "profiles"


class EnrichOrders(TableJoin):
    stream = "orders"
    table = "profiles"  # the join's output, read as an upsert changelog
    how = "left"
    output = "enriched"


def test_the_output_is_a_changelog_a_table_join_reads() -> None:
    topology = Topology.from_dict(
        {
            "streams": {s: {} for s in ("customers", "accounts", "profiles", "orders", "enriched")},
            "computations": {
                "profiles": {
                    "handler": f"{__name__}:DebeziumProfiles",
                    "inputs": {"customers": "key", "accounts": "key"},
                    "outputs": ["profiles"],
                },
                "enrich": {
                    "handler": f"{__name__}:EnrichOrders",
                    "inputs": {"orders": "key", "profiles": "key"},
                    "outputs": ["enriched"],
                },
            },
        }
    )
    harness = TestHarness(topology)

    def customer(op: str, after: Any) -> None:
        envelope = {"payload": {"op": op, "before": None, "after": after}}
        harness.feed("customers", b"k", json.dumps(envelope).encode(), 1)
        harness.run()

    def order(name: str) -> Any:
        harness.feed("orders", b"k", name.encode(), 2)
        harness.run()
        return json.loads(harness.outputs("enriched")[-1].value)["row"]

    assert order("o1") is None
    customer("c", {"name": "ada"})
    assert order("o2") == {"left": {"name": "ada"}, "right": None}
    harness.feed("accounts", b"k", b'{"balance": 3}', 1)
    harness.run()
    assert order("o3") == {"left": {"name": "ada"}, "right": {"balance": 3}}
    customer("d", None)
    assert order("o4") is None, "the tombstone deleted the joined row downstream"


def test_settings_come_from_params() -> None:
    join = TableTableJoin()
    join.setup({"left": "a", "right": "b", "output": "o", "how": "full", "changelog": "debezium"})
    assert (join.how, join.left_changelog, join.right_changelog) == (
        JoinType.FULL,
        Changelog.DEBEZIUM,
        Changelog.DEBEZIUM,
    )
    join.setup({"right_changelog": "upsert"})
    assert join.right_changelog is Changelog.UPSERT
    with pytest.raises(ValueError, match="both"):
        TableTableJoin().setup({"left": "a", "right": "a", "output": "o"})
    with pytest.raises(ValueError):
        TableTableJoin().setup({"left": "a", "right": "b", "output": "o", "how": "cross"})
