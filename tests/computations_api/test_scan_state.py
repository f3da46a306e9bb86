"""``Context.scan_state``: a key's entries by tag range, as a dict would hold them.

Random puts, deletes and range scans, several records per commit (so a scan sees
the commit's earlier records' changes and its own call's), against a plain dict
per key; the harness crashes between steps too."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import Computation, Context, Record, Topology
from millrace.computations.testing import TestHarness


class Ops(Computation):
    """Each record is a list of operations on its key's state; a scan produces what
    it found as JSON."""

    def process_record(self, ctx: Context, record: Record) -> None:
        for op in json.loads(record.value):
            if op[0] == "put":
                ctx.put_state(op[1], op[2].encode())
            elif op[0] == "del":
                ctx.delete_state(op[1])
            else:
                _, prefix, start, end, limit = op
                found = ctx.scan_state(prefix, start=start, end=end, limit=limit)
                ctx.produce(
                    "out", ctx.key, json.dumps([[t, v.decode()] for t, v in found]).encode()
                )


def oracle(
    state: dict[str, str], prefix: str, start: str, end: str | None, limit: int | None
) -> list[list[str]]:
    low, high = prefix + start, None if end is None else prefix + end
    return [
        [tag, state[tag]]
        for tag in sorted(state, key=str.encode)
        if tag.startswith(prefix) and low <= tag and (high is None or tag < high)
    ][:limit]


tags = st.sampled_from(["a", "a/1", "a/2", "a/10", "b/1", "b", "é/1", "a/\u00ff"])
pieces = st.sampled_from(["", "a", "a/", "b", "/1", "/2", "1", "é"])
ops = st.one_of(
    st.tuples(st.just("put"), tags, st.text("xyz", max_size=3)),
    st.tuples(st.just("del"), tags),
    st.tuples(
        st.just("scan"),
        pieces,
        pieces,
        st.one_of(st.none(), pieces),
        st.one_of(st.none(), st.integers(0, 3)),
    ),
)


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.sampled_from([b"k1", b"k2"]), st.lists(ops, max_size=5)), max_size=25
    ),
    crash_after=st.integers(0, 25),
)
def test_scans_see_what_a_dict_would_hold(
    records: list[tuple[bytes, list[Any]]], crash_after: int
) -> None:
    topology = Topology.from_dict(
        {
            "streams": {"in": {}, "out": {}},
            "computations": {
                "ops": {"handler": Ops, "inputs": {"in": "key"}, "outputs": ["out"]},
            },
        }
    )
    harness = TestHarness(topology)
    states: dict[bytes, dict[str, str]] = {b"k1": {}, b"k2": {}}
    expected: list[tuple[bytes, list[list[str]]]] = []
    for number, (key, record_ops) in enumerate(records):
        harness.feed("in", key, json.dumps(record_ops).encode(), 1_000 + number)
        state = states[key]
        for op in record_ops:
            if op[0] == "put":
                state[op[1]] = op[2]
            elif op[0] == "del":
                state.pop(op[1], None)
            else:
                expected.append((key, oracle(state, op[1], op[2], op[3], op[4])))
        if number == crash_after:
            harness.step()
            harness.crash()
    harness.run()
    got = [(r.key, json.loads(r.value)) for r in harness.outputs("out")]
    for key in (b"k1", b"k2"):  # each key's scans in its records' order
        assert [g for k, g in got if k == key] == [e for k, e in expected if k == key]
