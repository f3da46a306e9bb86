"""``dataflow.TableJoin`` in event-time mode (``versioned``) in the real engine: every
record meets the version of its key's row as of its own event time, for any arrival
order, duplicates and a crash (against a plain-Python as-of lookup); late records and
changes go to the late stream; the version history stays bounded."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millrace.computations import JSON, Context, Record, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import Changelog, TableJoin

Change = tuple[str, int, bool]  # key, event time, deleted
Probe = tuple[str, int]  # key, event time


def topology(handler: str) -> Topology:
    return Topology.from_dict(
        {
            "streams": {"orders": {}, "customers": {}, "enriched": {}, "late": {}},
            "computations": {
                "join": {
                    "handler": handler,
                    "inputs": {"orders": "key", "customers": "key"},
                    "outputs": ["enriched", "late"],
                }
            },
        }
    )


def join_class(*, left: bool, lateness: int, changelog: Changelog = Changelog.UPSERT) -> str:
    class Versioned(TableJoin):
        stream = "orders"
        table = "customers"
        output = "enriched"
        late_output = "late"
        mode = "event_time"

    Versioned.how = "left" if left else "inner"
    Versioned.allowed_lateness_ms = lateness
    Versioned.changelog = changelog
    name = f"Versioned_{left}_{lateness}_{changelog.value}"
    Versioned.__name__ = name
    globals()[name] = Versioned
    return f"{__name__}:{name}"


def row_value(index: int, deleted: bool) -> bytes:
    return b"" if deleted else json.dumps({"change": index}).encode()


Joined = tuple[str, str, int, str]  # key, record, event time, row as JSON


def joined(harness: TestHarness) -> Counter[Joined]:
    found: Counter[Joined] = Counter()
    for record in harness.outputs("enriched"):
        body = json.loads(record.value)
        assert body["v"] == 2
        text = body.get("record_raw", json.dumps(body.get("record")))  # the values are not JSON
        found[(body["key"], text, record.event_time_ms, json.dumps(body["row"]))] += 1
    return found


def as_of_oracle(changes: list[Change], probes: list[Probe], *, left: bool) -> Counter[Joined]:
    """Each probe with the row of the latest change of its key at or before its time."""
    expected: Counter[Joined] = Counter()
    for i, (key, t) in enumerate(probes):
        before = [(ct, j, deleted) for j, (k, ct, deleted) in enumerate(changes) if k == key]
        before = [c for c in before if c[0] <= t]
        row = None
        if before:
            _, j, deleted = max(before)
            row = None if deleted else {"change": j}
        if row is not None or left:
            expected[(key, f"o{i}", t, json.dumps(row))] += 1
    return expected


changes_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2_000), st.booleans()),
    unique_by=lambda c: (c[0], c[1]),
    max_size=12,
)
probes_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2_000)), max_size=12
)


@pytest.mark.parametrize("lateness", [0, 300])
@pytest.mark.parametrize("left", [False, True], ids=["inner", "left"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=changes_strategy, probes=probes_strategy, data=st.data())
def test_every_record_meets_the_version_as_of_its_time_in_any_order(
    left: bool, lateness: int, changes: list[Change], probes: list[Probe], data: st.DataObject
) -> None:
    items = [("customers", k, t, row_value(j, d), f"c{j}") for j, (k, t, d) in enumerate(changes)]
    items += [("orders", k, t, f"o{i}".encode(), f"o{i}") for i, (k, t) in enumerate(probes)]
    order = data.draw(st.permutations(items))
    again = data.draw(st.lists(st.sampled_from(items), max_size=4)) if items else []
    crash_at = data.draw(st.integers(0, len(order)))
    harness = TestHarness(topology(join_class(left=left, lateness=lateness)))
    for index, (stream, key, t, value, name) in enumerate(order):
        harness.feed(stream, key.encode(), value, t, record_id=name.encode())
        # A valid watermark: no change behind it, no record beyond the lateness.
        rest = order[index + 1 :]
        bounds = [t for s, _, t, _, _ in rest if s == "customers"]
        bounds += [t + lateness for s, _, t, _, _ in rest if s == "orders"]
        if bounds:
            harness.advance_watermark(min(bounds))
        if index == crash_at:
            harness.crash()
    for stream, key, t, value, name in again:  # duplicates: dropped before the join
        harness.feed(stream, key.encode(), value, t, record_id=name.encode())
    harness.advance_watermark(10_000)
    assert harness.outputs("late") == []
    assert joined(harness) == as_of_oracle(changes, probes, left=left)
    for raw in (b"a", b"b"):
        assert harness.state("join", raw, "pending") is None, "every record was joined"


def test_a_record_waits_for_the_watermark_and_meets_a_version_that_arrives_after_it() -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=0)))
    harness.feed("customers", b"a", b'{"tier": 1}', 100)
    harness.feed("orders", b"a", b"o", 500)
    harness.feed("customers", b"a", b'{"tier": 2}', 400)  # arrives after the order
    harness.feed("customers", b"a", b'{"tier": 3}', 600)  # after the order's time
    harness.run()
    assert harness.outputs("enriched") == [], "buffered until the watermark passes 500"
    harness.advance_watermark(501)
    assert joined(harness) == Counter({("a", "o", 500, '{"tier": 2}'): 1})


def test_a_record_before_the_first_version_or_after_a_delete_meets_no_row() -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=0, changelog=Changelog.DEBEZIUM)))
    envelope = {"op": "c", "before": None, "after": {"tier": 1}}
    harness.feed("customers", b"a", json.dumps(envelope).encode(), 100)
    harness.feed("customers", b"a", json.dumps({"op": "d", "before": {"tier": 1}}).encode(), 300)
    for t in (50, 200, 300, 400):
        harness.feed("orders", b"a", f"o{t}".encode(), t)
    harness.advance_watermark(1_000)
    assert joined(harness) == Counter(
        {
            ("a", "o50", 50, "null"): 1,
            ("a", "o200", 200, '{"tier": 1}'): 1,
            ("a", "o300", 300, "null"): 1,
            ("a", "o400", 400, "null"): 1,
        }
    )


def test_a_late_record_joins_nothing_and_goes_to_the_late_stream() -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=0)))
    harness.feed("customers", b"a", b'{"tier": 1}', 100)
    harness.advance_watermark(1_000)
    harness.feed("orders", b"a", b"late", 999)
    harness.run()
    assert joined(harness) == Counter()
    assert [(r.key, r.value, r.event_time_ms) for r in harness.outputs("late")] == [
        (b"a", b"late", 999)
    ]
    assert harness.reported_late("join") == [1]


def test_a_change_older_than_the_horizon_is_late_and_changes_nothing() -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=0)))
    harness.feed("customers", b"a", b'{"tier": 1}', 100)
    harness.advance_watermark(2_000)
    harness.feed("customers", b"a", b'{"tier": 2}', 1_200)  # behind the watermark
    harness.feed("orders", b"a", b"o", 2_500)
    harness.advance_watermark(3_000)
    assert joined(harness) == Counter({("a", "o", 2_500, '{"tier": 1}'): 1})
    assert [r.value for r in harness.outputs("late")] == [b'{"tier": 2}']


def test_a_change_late_within_the_lateness_counts_for_records_joined_after_it() -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=1_000)))
    harness.feed("customers", b"a", b'{"tier": 1}', 100)
    harness.advance_watermark(2_000)  # horizon: 1_000
    harness.feed("orders", b"a", b"before", 1_500)  # joined at once: behind the watermark
    harness.run()
    harness.feed("customers", b"a", b'{"tier": 2}', 1_200)  # late, but within the horizon
    harness.feed("orders", b"a", b"after", 1_500)
    harness.advance_watermark(3_000)
    assert joined(harness) == Counter(
        {("a", "before", 1_500, '{"tier": 1}'): 1, ("a", "after", 1_500, '{"tier": 2}'): 1}
    )
    assert harness.outputs("late") == []


@pytest.mark.parametrize("last", [b'{"tier": 1}', b'{"tier": 2}'])
def test_of_two_changes_at_one_instant_the_later_to_arrive_wins(last: bytes) -> None:
    harness = TestHarness(topology(join_class(left=True, lateness=0)))
    first = b'{"tier": 2}' if last == b'{"tier": 1}' else b'{"tier": 1}'
    harness.feed("customers", b"a", first, 100)
    harness.run()
    harness.feed("customers", b"a", last, 100)
    harness.feed("orders", b"a", b"o", 200)
    harness.advance_watermark(300)
    assert joined(harness) == Counter({("a", "o", 200, last.decode()): 1})


def test_the_history_keeps_only_what_records_not_yet_late_can_meet() -> None:
    harness = TestHarness(topology(join_class(left=False, lateness=50)))
    for step in range(60):
        harness.feed("customers", b"a", json.dumps({"n": step}).encode(), step * 10)
        harness.advance_watermark(step * 10)
        history = harness.state_rows("join", b"a", "v/")
        assert len(history) <= 7, "the versions within the lateness, and one before"
    harness.feed("customers", b"a", b"", 700)  # deleted
    harness.feed("orders", b"a", b"o", 800)
    harness.advance_watermark(1_000)
    assert joined(harness) == Counter()
    assert harness.state_rows("join", b"a", "") == [], "a deleted key leaves nothing"


def test_the_mode_and_its_settings_come_from_params() -> None:
    join = TableJoin()
    params = {"stream": "s", "table": "t", "output": "o", "mode": "event_time", "how": "left"}
    join.setup({**params, "allowed_lateness_ms": 5, "late_output": "late"})
    assert (join.versioned, join.left_join, join.allowed_lateness_ms) == (True, True, 5)
    with pytest.raises(ValueError, match="event-time mode"):
        TableJoin().setup({**params, "mode": "arrival", "late_output": "late"})
    with pytest.raises(ValueError, match="mode"):
        TableJoin().setup({**params, "mode": "processing_time"})
    with pytest.raises(ValueError, match="both"):
        TableJoin().setup({**params, "table": "s"})


class LegacyStateTableJoin(TableJoin):
    """Writes history and buffered records as the format before one row per version
    and per record did (one JSON list each), for changes and orders marked
    ``legacy``: what a node upgraded with such state finds in its store."""

    stream, table, output, mode, how = "orders", "customers", "enriched", "event_time", "left"

    def process_record(self, ctx: Context, record: Record) -> None:
        if b"legacy" not in record.value:
            super().process_record(ctx, record)
            return
        t = record.event_time_ms
        if record.stream == self.table:
            history = ctx.get_state("versions", JSON) or []
            ctx.put_state("versions", [*history, {"t": t, "row": json.loads(record.value)}], JSON)
        else:
            pending = ctx.get_state("pending", JSON) or []
            ctx.put_state("pending", [*pending, {"t": t, "v": record.value.decode()}], JSON)
            ctx.set_timer(f"at:{t}", t)


def test_state_of_the_old_format_is_read_and_moved_to_rows() -> None:
    harness = TestHarness(topology(f"{__name__}:LegacyStateTableJoin"))
    harness.feed("customers", b"a", b'{"tier": "legacy-1"}', 100)
    harness.feed("orders", b"a", b"legacy-order", 150)
    harness.run()
    harness.feed("customers", b"a", b'{"tier": 2}', 300)
    harness.feed("orders", b"a", b"new-order", 350)
    harness.advance_watermark(1_000)
    harness.run()
    assert joined(harness) == Counter({
        ("a", "legacy-order", 150, json.dumps({"tier": "legacy-1"})): 1,
        ("a", "new-order", 350, json.dumps({"tier": 2})): 1,
    })  # fmt: skip
    assert harness.state("join", b"a", "versions") is None
    assert harness.state("join", b"a", "pending") is None


def test_the_python_names_are_the_topology_names_and_the_old_ones_still_work() -> None:
    class Old(TableJoin):
        stream, table, output = "s", "t", "o"
        versioned = True
        left_join = True

    join = Old()
    with pytest.warns(DeprecationWarning) as warned:
        join.setup({})
    assert sorted(str(w.message) for w in warned) == [
        "Old.left_join = True is now how = 'left'",
        "Old.versioned = True is now mode = 'event_time'",
    ]
    assert (join.mode, join.how, join.versioned, join.left_join) == (
        "event_time",
        "left",
        True,
        True,
    )
    with pytest.raises(ValueError, match="how 'outer': expected inner or left"):
        TableJoin().setup({"stream": "s", "table": "t", "output": "o", "how": "outer"})
