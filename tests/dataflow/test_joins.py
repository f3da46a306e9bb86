"""``dataflow.IntervalJoin`` in the real engine against a nested-loop join: inner and
outer joins give the same rows for any arrival order and duplicates; late records go
to the late stream."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import JSON, Context, Record, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import IntervalJoin, JoinType, decode_join

LOWER, UPPER = -200, 300


def topology(handler: str) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"clicks": {}, "views": {}, "joined": {}, "late": {}},
            "computations": {
                "join": {
                    "handler": handler,
                    "inputs": {"clicks": "key", "views": "key"},
                    "outputs": ["joined", "late"],
                }
            },
        }
    )


def join_class(how: JoinType, lateness: int) -> str:
    class Join(IntervalJoin):
        left = "clicks"
        right = "views"
        lower_ms = LOWER
        upper_ms = UPPER
        allowed_lateness_ms = lateness
        output = "joined"
        late_output = "late"

    Join.how = how
    name = f"Join_{how.value}_{lateness}"
    Join.__name__ = name
    globals()[name] = Join
    return f"{__name__}:{name}"


Row = tuple[str, Any, Any]


def rows(harness: TestHarness) -> Counter[Row]:
    found: Counter[Row] = Counter()
    for record in harness.outputs("joined"):
        body = json.loads(record.value)
        side = [
            None if body[s] is None else (body[s]["t"], body[s]["raw"]) for s in ("left", "right")
        ]
        found[(body["key"], side[0], side[1])] += 1
    return found


def nested_loop(
    clicks: list[tuple[str, int]], views: list[tuple[str, int]], how: JoinType
) -> Counter[Row]:
    expected: Counter[Row] = Counter()
    matched_left, matched_right = set(), set()
    for i, (key, lt) in enumerate(clicks):
        for j, (other, rt) in enumerate(views):
            if key == other and lt + LOWER <= rt <= lt + UPPER:
                expected[(key, (lt, f"c{i}"), (rt, f"v{j}"))] += 1
                matched_left.add(i)
                matched_right.add(j)
    if how in (JoinType.LEFT, JoinType.FULL):
        for i, (key, lt) in enumerate(clicks):
            if i not in matched_left:
                expected[(key, (lt, f"c{i}"), None)] += 1
    if how in (JoinType.RIGHT, JoinType.FULL):
        for j, (key, rt) in enumerate(views):
            if j not in matched_right:
                expected[(key, None, (rt, f"v{j}"))] += 1
    return expected


side = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(-4_500, -1_500)), max_size=15)
"""Event times before 1970 (valid, like their timers), some timers after it."""


@pytest.mark.parametrize("how", list(JoinType))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clicks=side, views=side, data=st.data())
def test_joins_equal_a_nested_loop_in_any_order(
    how: JoinType, clicks: list[tuple[str, int]], views: list[tuple[str, int]], data: st.DataObject
) -> None:
    items = [("clicks", k, t, f"c{i}") for i, (k, t) in enumerate(clicks)]
    items += [("views", k, t, f"v{j}") for j, (k, t) in enumerate(views)]
    order = data.draw(st.permutations(items))
    again = data.draw(st.lists(st.sampled_from(items), max_size=4)) if items else []
    harness = TestHarness(topology(join_class(how, lateness=4_000)))
    seen = -1
    for stream, key, t, name in [*order, *again]:
        harness.feed(stream, key.encode(), name.encode(), t, record_id=name.encode())
        seen = max(seen, t)
        harness.advance_watermark(seen - 500)
    harness.advance_watermark(100_000)
    assert harness.outputs("late") == []
    assert rows(harness) == nested_loop(clicks, views, how)


def test_a_late_record_joins_nothing_and_goes_to_the_late_stream() -> None:
    harness = TestHarness(topology(join_class(JoinType.INNER, lateness=0)))
    harness.feed("clicks", b"a", b"c0", 1_000, record_id=b"c0")
    harness.advance_watermark(2_000)
    harness.feed("views", b"a", b"v0", 1_100, record_id=b"v0")  # would match, but late
    harness.advance_watermark(10_000)
    assert rows(harness) == Counter()
    assert [(r.key, r.value) for r in harness.outputs("late")] == [(b"a", b"v0")]
    assert harness.state("join", b"a", "L") is None, "the buffer is collected"


class LegacyStateJoin(IntervalJoin):
    """Writes a record marked ``legacy:`` as the format before one row per record did
    (a side as one JSON list, a timer tagged ``x:SIDE:ID``): what a node upgraded
    with buffered records finds in its store."""

    left, right, lower_ms, upper_ms, output = "clicks", "views", LOWER, UPPER, "joined"
    how = JoinType.FULL

    def process_record(self, ctx: Context, record: Record) -> None:
        if not record.value.startswith(b"legacy:"):
            super().process_record(ctx, record)
            return
        side = "L" if record.stream == self.left else "R"
        entry = {"t": record.event_time_ms, "id": record.record_id.hex(),
                 "v": record.value.decode(), "m": False}  # fmt: skip
        ctx.put_state(side, [*(ctx.get_state(side, JSON) or []), entry], JSON)
        ctx.set_timer(f"x:{side}:{entry['id']}", self._expiry(side, record.event_time_ms))


def test_records_buffered_in_the_old_format_still_join_and_expire() -> None:
    harness = TestHarness(topology(f"{__name__}:LegacyStateJoin"))
    harness.feed("clicks", b"k", b"legacy:matched", 1_000)
    harness.feed("clicks", b"k", b"legacy:alone", 5_000)
    harness.run()
    harness.feed("views", b"k", b"view", 1_100)
    harness.run()
    harness.advance_watermark(20_000)
    harness.run()
    assert rows(harness) == Counter({
        ("k", (1_000, "legacy:matched"), (1_100, "view")): 1,
        ("k", (5_000, "legacy:alone"), None): 1,
    })  # fmt: skip
    assert harness.state("join", b"k", "L") is None


def test_outputs_embed_values_as_parsed_json_and_version_1_stays_readable() -> None:
    def joined(version: int | None) -> list[dict[str, Any]]:
        class Versioned(IntervalJoin):
            left, right, lower_ms, upper_ms, output = "clicks", "views", 0, 100, "joined"
            how = JoinType.LEFT

        if version is not None:
            Versioned.output_version = version
        globals()["Versioned"] = Versioned
        harness = TestHarness(topology(f"{__name__}:Versioned"))
        harness.feed("clicks", b"k", b'{"page": 1}', 10)
        harness.feed("views", b"k", b"plain text", 20)
        harness.feed("clicks", b"k", b"\xff\xfe", 500)
        harness.advance_watermark(10_000)
        return [json.loads(r.value) for r in harness.outputs("joined")]

    now = joined(None)
    assert sorted(now, key=lambda b: b["left"]["t"]) == [
        {"v": 2, "key": "k", "left": {"t": 10, "value": {"page": 1}},
         "right": {"t": 20, "raw": "plain text"}},
        {"v": 2, "key": "k", "left": {"t": 500, "raw": {"base64": "//4="}}, "right": None},
    ]  # fmt: skip
    before = joined(1)
    assert {b["v"] for b in before} == {1}
    assert [b["left"]["value"] for b in before if b["right"]] == ['{"page": 1}']
    as_read = [decode_join(json.dumps(b).encode()) for b in before]
    assert sorted(as_read, key=lambda b: b["left"]["t"]) == sorted(
        now, key=lambda b: b["left"]["t"]
    )
    assert [decode_join(json.dumps(b).encode()) for b in now] == now
    table_v1 = {"v": 1, "key": "a", "record": '{"order": 3}', "row": {"tier": 1}}
    assert decode_join(json.dumps(table_v1).encode()) == {
        "v": 2, "key": "a", "record": {"order": 3}, "row": {"tier": 1},
    }  # fmt: skip
