"""A batch hook's bulk calls (``read_states``, ``write_states``, ``delete_states``,
``set_timers``) mixed in any order with a key's own context (``for_key``): what is
kept equals a dict applied in the same order, for the keys the call took whole, and
nothing of the keys it left (the engine keeps their bulk changes flat until it
applies them: ``engine/_pending.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import (
    BatchContext,
    Computation,
    Context,
    FiredTimer,
    Record,
)
from tests.computations_api._one_computation import harness_of

KEYS = [b"a", b"b", b"c", b"d"]
TAGS = ["x", "y"]

key = st.sampled_from(KEYS)
tag = st.sampled_from(TAGS)
time = st.integers(0, 1_000)
op = st.one_of(
    st.tuples(st.just("write"), st.lists(st.tuples(key, tag, st.binary(max_size=3)))),
    st.tuples(st.just("delete"), st.lists(st.tuples(key, tag))),
    st.tuples(st.just("timers"), st.lists(st.tuples(key, tag, time))),
    st.tuples(st.just("read"), st.lists(st.tuples(key, tag))),
    st.tuples(st.just("put"), key, tag, st.binary(max_size=3)),
    st.tuples(st.just("drop"), key, tag),
    st.tuples(st.just("timer"), key, tag, time),
    st.tuples(st.just("untimer"), key, tag),
)


class Scripted(Computation):
    """Runs :attr:`script` in its one ``process_batch`` call; leaves :attr:`left`'s
    records; checks every read against :attr:`model`."""

    script: ClassVar[list[Any]] = []
    left: ClassVar[set[bytes]] = set()

    def process_record(self, ctx: Context, record: Record) -> None:
        pass  # a left key's records: nothing

    def process_batch(self, batch: BatchContext, records: Sequence[Record]) -> Sequence[Record]:
        states: dict[tuple[bytes, str], bytes | None] = {}
        for kind, *args in self.script:
            if kind == "write":
                batch.write_states([k for k, _, _ in args[0]], [t for _, t, _ in args[0]],
                                   [v for _, _, v in args[0]])  # fmt: skip
                states.update(((k, t), v) for k, t, v in args[0])
            elif kind == "delete":
                batch.delete_states([k for k, _ in args[0]], [t for _, t in args[0]])
                states.update(((k, t), None) for k, t in args[0])
            elif kind == "timers":
                batch.set_timers([k for k, _, _ in args[0]], [t for _, t, _ in args[0]],
                                 [ms for _, _, ms in args[0]])  # fmt: skip
            elif kind == "read":
                got = batch.read_states([k for k, _ in args[0]], [t for _, t in args[0]])
                assert got == [states.get(kt) for kt in args[0]]
            elif kind == "put":
                batch.for_key(args[0]).put_state(args[1], args[2])
                states[(args[0], args[1])] = args[2]
            elif kind == "drop":
                batch.for_key(args[0]).delete_state(args[1])
                states[(args[0], args[1])] = None
            elif kind == "timer":
                batch.for_key(args[0]).set_timer(args[1], args[2])
            else:
                batch.for_key(args[0]).delete_timer(args[1])
        return [r for r in records if r.key in self.left]

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("out", ctx.key, b"%s@%d" % (timer.tag.encode(), timer.time_ms))


def expected(script: list[Any], left: set[bytes]) -> tuple[dict[Any, bytes], set[Any]]:
    """The states and fired timers a dict applied in order keeps, without ``left``'s."""
    states: dict[tuple[bytes, str], bytes | None] = {}
    timers: dict[tuple[bytes, str], int | None] = {}
    for kind, *args in script:
        if kind == "write":
            states.update(((k, t), v) for k, t, v in args[0])
        elif kind == "delete":
            states.update(((k, t), None) for k, t in args[0])
        elif kind == "timers":
            timers.update(((k, t), ms) for k, t, ms in args[0])
        elif kind == "put":
            states[(args[0], args[1])] = args[2]
        elif kind == "drop":
            states[(args[0], args[1])] = None
        elif kind == "timer":
            timers[(args[0], args[1])] = args[2]
        elif kind == "untimer":
            timers[(args[0], args[1])] = None
    kept = {kt: v for kt, v in states.items() if v is not None and kt[0] not in left}
    fired = {
        (k, b"%s@%d" % (t.encode(), ms))
        for (k, t), ms in timers.items()
        if ms is not None and k not in left
    }
    return kept, fired


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=12), st.sets(key))
def test_bulk_and_per_key_changes_keep_what_a_dict_would(
    script: list[Any], left: set[bytes]
) -> None:
    Scripted.script, Scripted.left = script, left
    harness = harness_of(f"{__name__}:Scripted")
    harness.feed_many("in", [(k, b"v", 0) for k in KEYS])
    harness.run()
    states, fired = expected(script, left)
    kept = {
        (k, t): value for k in KEYS for t in TAGS if (value := harness.state("c", k, t)) is not None
    }
    assert kept == states
    harness.advance_watermark(10_000)
    harness.run()
    assert {(r.key, r.value) for r in harness.outputs("out")} == fired
