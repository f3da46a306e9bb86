"""``IntervalJoin`` with conditions beyond a fixed interval, against a nested-loop join,
for any arrival order and duplicates: bounds read from the left record
(``left_until``, ``left_from``), a residual predicate (``where``), and the unbounded
form with a state time-to-live (``ttl_ms``); from a topology file's params."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import Record, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import JoinType

Row = tuple[str, Any, Any]


def same_parity(left: Record, right: Record) -> bool:
    """The residual predicate the topology names."""
    return bool(json.loads(left.value)["n"] % 2 == json.loads(right.value)["w"] % 2)


def harness(params: dict[str, Any], **options: Any) -> TestHarness:
    base = {"left": "clicks", "right": "views", "output": "joined", "late_output": "late",
            "allowed_lateness_ms": 4_000}  # fmt: skip
    return TestHarness(
        Topology.from_dict(
            {
                "streams": {"clicks": {}, "views": {}, "joined": {}, "late": {}},
                "computations": {
                    "join": {
                        "handler": "millrace.dataflow:IntervalJoin",
                        "inputs": {"clicks": "key", "views": "key"},
                        "outputs": ["joined", "late"],
                        "params": {**base, **params},
                    }
                },
            }
        ),
        **options,
    )


def rows(h: TestHarness) -> Counter[Row]:
    found: Counter[Row] = Counter()
    for record in h.outputs("joined"):
        body = json.loads(record.value)
        sides = [None if body[s] is None else body[s]["value"]["id"]
                 for s in ("left", "right")]  # fmt: skip
        found[(body["key"], sides[0], sides[1])] += 1
    return found


def oracle(
    clicks: list[dict[str, Any]],
    views: list[dict[str, Any]],
    how: JoinType,
    joins: Any,
) -> Counter[Row]:
    expected: Counter[Row] = Counter()
    matched: set[str] = set()
    for left in clicks:
        for right in views:
            if left["key"] == right["key"] and joins(left, right):
                expected[(left["key"], left["id"], right["id"])] += 1
                matched.update((left["id"], right["id"]))
    if how in (JoinType.LEFT, JoinType.FULL):
        expected.update((c["key"], c["id"], None) for c in clicks if c["id"] not in matched)
    if how in (JoinType.RIGHT, JoinType.FULL):
        expected.update((v["key"], None, v["id"]) for v in views if v["id"] not in matched)
    return expected


events = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3_000), st.integers(-300, 500)),
    max_size=12,
)


def feed(h: TestHarness, clicks: list[dict[str, Any]], views: list[dict[str, Any]],
         data: st.DataObject) -> None:  # fmt: skip
    items = [("clicks", c) for c in clicks] + [("views", v) for v in views]
    order = data.draw(st.permutations(items))
    again = data.draw(st.lists(st.sampled_from(items), max_size=3)) if items else []
    seen = -1
    for stream, body in [*order, *again]:
        value = json.dumps(body).encode()
        h.feed(stream, body["key"].encode(), value, body["t"], record_id=body["id"].encode())
        seen = max(seen, body["t"])
        h.advance_watermark(seen - 500)
    h.advance_watermark(100_000)
    assert h.outputs("late") == []


@pytest.mark.parametrize("how", list(JoinType))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=events, right=events, data=st.data())
def test_bounds_read_from_the_left_record_and_a_residual_predicate(
    how: JoinType, left: list[tuple[str, int, int]], right: list[tuple[str, int, int]],
    data: st.DataObject,
) -> None:  # fmt: skip
    clicks = [{"id": f"c{i}", "key": k, "t": t, "n": i, "until": t + d}
              for i, (k, t, d) in enumerate(left)]  # fmt: skip
    views = [{"id": f"v{j}", "key": k, "t": t, "w": d % 4} for j, (k, t, d) in enumerate(right)]
    h = harness({"lower_ms": -200, "upper_ms": 300, "left_until": "until", "how": how.value,
                 "where": f"{__name__}:same_parity"})  # fmt: skip
    feed(h, clicks, views, data)

    def joins(c: dict[str, Any], v: dict[str, Any]) -> bool:
        in_interval = c["t"] - 200 <= v["t"] <= c["t"] + 300
        return bool(in_interval and v["t"] <= c["until"] and c["n"] % 2 == v["w"] % 2)

    assert rows(h) == oracle(clicks, views, how, joins)


@pytest.mark.parametrize("how", [JoinType.INNER, JoinType.FULL])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=events, right=events, data=st.data())
def test_the_unbounded_form_joins_within_its_time_to_live_and_frees_the_state(
    how: JoinType, left: list[tuple[str, int, int]], right: list[tuple[str, int, int]],
    data: st.DataObject,
) -> None:  # fmt: skip
    clicks = [{"id": f"c{i}", "key": k, "t": t, "n": i} for i, (k, t, _) in enumerate(left)]
    views = [{"id": f"v{j}", "key": k, "t": t, "w": 0} for j, (k, t, _) in enumerate(right)]
    h = harness({"ttl_ms": "250ms", "how": how.value, "left_from": "t"})
    feed(h, clicks, views, data)
    # ttl: |left.t - right.t| <= 250; left_from = its own time: the right one not before.
    assert rows(h) == oracle(clicks, views, how, lambda c, v: c["t"] <= v["t"] <= c["t"] + 250)
    for key in (b"a", b"b"):
        assert h.state_rows("join", key, "") == [], "every record's state is freed"


def test_bad_settings_and_bad_bounds() -> None:
    with pytest.raises(ValueError, match="ttl_ms replaces lower_ms"):
        harness({"ttl_ms": 100, "lower_ms": 0})
    with pytest.raises(ValueError, match=r"where 'no\.such:thing' cannot be imported"):
        harness({"lower_ms": 0, "upper_ms": 10, "where": "no.such:thing"})
    with pytest.raises(ValueError, match="select_values needs a select function"):
        harness({"lower_ms": 0, "upper_ms": 10, "select_values": True})
    h = harness({"lower_ms": 0, "upper_ms": 10, "select": f"{__name__}:offer_of_values",
                 "select_values": True}, dead_letters=True)  # fmt: skip
    h.feed("clicks", b"a", b'{"id": "c"}', 5)
    h.feed("views", b"a", b"not json", 6)
    h.run()
    assert any(
        "select_values: the right record's value is not JSON" in d.error
        for d in h.dead_letters("join")
    ), h.dead_letters("join")
    h = harness({"lower_ms": 0, "upper_ms": 10, "left_until": "until"}, dead_letters=True)
    h.feed("clicks", b"a", b'{"until": "later"}', 5)
    h.run()
    assert any("not a time in ms" in d.error for d in h.dead_letters("join"))


def offer(left: Record | None, right: Record | None) -> dict[str, Any]:
    """A ``select`` function: the two ids, either None."""
    return {"ids": [None if r is None else json.loads(r.value)["id"] for r in (left, right)]}


def offer_of_values(left: Any, right: Any) -> dict[str, Any]:
    """A ``select`` function with ``select_values``: the two ids, either None."""
    return {"ids": [None if value is None else value["id"] for value in (left, right)]}


def selected_rows(h: TestHarness) -> Counter[Row]:
    found: Counter[Row] = Counter()
    for record in h.outputs("joined"):
        left, right = json.loads(record.value)["ids"]
        found[(record.key.decode(), left, right)] += 1
    return found


@pytest.mark.parametrize("how", list(JoinType))
@pytest.mark.parametrize("select", ["", "records", "values"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=events, right=events, data=st.data())
def test_a_unique_left_side_decides_right_records_at_once_with_the_same_pairs(
    how: JoinType, select: str, left: list[tuple[str, int, int]],
    right: list[tuple[str, int, int]], data: st.DataObject,
) -> None:  # fmt: skip
    """``left_unique``: at most one left record per key (the first of each key here),
    any arrival order, duplicates: the nested-loop join's pairs, the right records
    that met their left one never kept, every row freed at the end."""
    firsts = {k: (k, t, d) for k, t, d in reversed(left)}.values()
    clicks = [{"id": f"c{i}", "key": k, "t": t, "n": i, "until": t + d}
              for i, (k, t, d) in enumerate(firsts)]  # fmt: skip
    views = [{"id": f"v{j}", "key": k, "t": t, "w": d % 4} for j, (k, t, d) in enumerate(right)]
    params = {"lower_ms": -200, "upper_ms": 300, "left_until": "until", "how": how.value,
              "where": f"{__name__}:same_parity", "left_unique": True}  # fmt: skip
    if select == "records":
        params["select"] = f"{__name__}:offer"
    elif select == "values":
        params.update(select=f"{__name__}:offer_of_values", select_values=True)
    h = harness(params)
    feed(h, clicks, views, data)

    def joins(c: dict[str, Any], v: dict[str, Any]) -> bool:
        in_interval = c["t"] - 200 <= v["t"] <= c["t"] + 300
        return bool(in_interval and v["t"] <= c["until"] and c["n"] % 2 == v["w"] % 2)

    assert (selected_rows(h) if select else rows(h)) == oracle(clicks, views, how, joins)
    for key in (b"a", b"b"):
        assert h.state_rows("join", key, "") == [], "every record's state is freed"


def test_a_unique_left_side_keeps_no_right_record_that_met_its_left_one() -> None:
    h = harness({"lower_ms": 0, "upper_ms": 1_000, "left_unique": True})
    h.feed("clicks", b"a", b'{"id": "c"}', 10)
    for n in range(5):
        h.feed("views", b"a", json.dumps({"id": f"v{n}"}).encode(), 20 + n)
    h.run()
    # The left record's row and its copy found by name (L@): no right record kept.
    assert [tag[:2] for tag, _ in h.state_rows("join", b"a", "")] == ["L/", "L@"]
    assert len(h.outputs("joined")) == 5


def test_a_second_left_record_of_a_unique_key_is_dead_lettered_and_nothing_else_lost() -> None:
    h = harness({"lower_ms": 0, "upper_ms": 1_000, "left_unique": True}, dead_letters=True)
    h.feed("clicks", b"a", b'{"id": "c1"}', 10)
    h.feed("clicks", b"a", b'{"id": "c2"}', 11)
    h.feed("views", b"a", b'{"id": "v"}', 12)
    h.run()
    assert any("already has a left record" in d.error for d in h.dead_letters("join"))
    pairs = [json.loads(r.value) for r in h.outputs("joined")]
    assert [(p["left"]["value"]["id"], p["right"]["value"]["id"]) for p in pairs] == [("c1", "v")]


def test_left_unique_takes_a_boolean() -> None:
    with pytest.raises(ValueError, match="left_unique 'yes': expected true or false"):
        harness({"lower_ms": 0, "upper_ms": 10, "left_unique": "yes"})


@pytest.mark.parametrize("turned", ["on", "off"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=events, right=events, split=st.integers(0, 30), data=st.data())
def test_left_unique_turned_on_or_off_over_kept_state_keeps_the_same_pairs(
    turned: str, left: list[tuple[str, int, int]], right: list[tuple[str, int, int]],
    split: int, data: st.DataObject,
) -> None:  # fmt: skip
    """The setting changed between two runs over the same store (a restart with another
    topology): rows kept by one form are found by the other, nothing is left behind."""
    firsts = {k: (k, t, d) for k, t, d in reversed(left)}.values()
    clicks: list[dict[str, Any]] = [
        {"id": f"c{i}", "key": k, "t": t, "n": i} for i, (k, t, _) in enumerate(firsts)
    ]
    views: list[dict[str, Any]] = [
        {"id": f"v{j}", "key": k, "t": t, "w": 0} for j, (k, t, _) in enumerate(right)
    ]
    params = {"lower_ms": -200, "upper_ms": 300, "how": "full"}
    h = harness({**params, "left_unique": turned == "off"})
    items = data.draw(
        st.permutations([("clicks", c) for c in clicks] + [("views", v) for v in views])
    )
    seen = -1
    for at, (stream, body) in enumerate(items):
        if at == split:
            h.run()
            h.topology = harness({**params, "left_unique": turned == "on"}).topology
            h.crash()
        h.feed(stream, body["key"].encode(), json.dumps(body).encode(), body["t"],
               record_id=body["id"].encode())  # fmt: skip
        seen = max(seen, body["t"])
        h.advance_watermark(seen - 500)
    h.advance_watermark(100_000)
    h.run()
    expected = oracle(
        clicks, views, JoinType.FULL, lambda c, v: c["t"] - 200 <= v["t"] <= c["t"] + 300
    )
    assert rows(h) == expected
    for key in (b"a", b"b"):
        assert h.state_rows("join", key, "") == [], "every record's state is freed"
