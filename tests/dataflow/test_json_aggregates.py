"""Aggregates of any JSON value (``top_n``, ``max_by``, ``min_by``, ``collect``) and a
window read from the record (``field:START:END``), against plain-Python oracles: in
two stages (count per auction, then per window the auctions with the most bids, ties
included: Nexmark q5's shape), in any arrival order, one record at a time or in
batches, with crashes between steps."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, Record, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import Collect, Combined, Count, FieldWindows, MaxBy, MinBy, TopN
from millrace.dataflow._builtins import parse_aggregate

WINDOW_MS = 10_000

TWO_STAGES = {
    "streams": {"bids": {}, "counts": {}, "hot": {}},
    "computations": {
        "count": {
            "handler": "millrace.dataflow:WindowedAggregation", "intervals": 2,
            "inputs": {"bids": "json:auction"}, "outputs": ["counts"],
            "params": {"window": f"tumbling:{WINDOW_MS}", "aggregate": "count",
                       "output": "counts"},
        },
        "hot": {
            "handler": "millrace.dataflow:WindowedAggregation", "intervals": 2,
            "inputs": {"counts": "json:window"}, "outputs": ["hot"],
            "params": {"window": f"tumbling:{WINDOW_MS}", "aggregate": "top_n:2:value",
                       "output": "hot"},
        },
    },
}  # fmt: skip

bids = st.lists(
    st.tuples(st.integers(0, 6), st.integers(0, 3 * WINDOW_MS - 1)), min_size=1, max_size=60
)


def top_two_with_ties(counts: Counter[int]) -> list[tuple[int, int]]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    if len(ranked) <= 2:
        return ranked
    return [(a, n) for a, n in ranked if n >= ranked[1][1]]


@settings(max_examples=40, deadline=None)
@given(events=bids, vectorized=st.booleans(), crashes=st.sets(st.integers(0, 59)))
def test_the_auctions_with_the_most_bids_per_window_ties_included(
    events: list[tuple[int, int]], vectorized: bool, crashes: set[int]
) -> None:
    spec = json.loads(json.dumps(TWO_STAGES))
    for computation in spec["computations"].values():
        computation["params"]["vectorized"] = vectorized
    h = TestHarness(Topology.from_dict(spec))
    for n, (auction, ts) in enumerate(events):
        h.feed("bids", b"", json.dumps({"auction": auction, "price": n}).encode(), ts)
        if n in crashes:
            h.crash()
    h.run()
    h.advance_watermark(10 * WINDOW_MS)
    h.run()
    per_window: dict[int, Counter[int]] = {}
    for auction, ts in events:
        per_window.setdefault(ts - ts % WINDOW_MS, Counter())[auction] += 1
    got: dict[int, list[tuple[int, int]]] = {}
    for record in h.outputs("hot"):
        # The second stage's window holds the first stage's panes (made at their end).
        pane = json.loads(record.value)
        start = pane["window"][0]
        assert start not in got, "one pane per window"
        got[start] = [(int(p["key"]), p["value"]) for p in pane["value"]]
    expected = {start: top_two_with_ties(counts) for start, counts in per_window.items()}
    assert {start: sorted(v) for start, v in got.items()} == {
        start: sorted(v) for start, v in expected.items()
    }


def test_the_combiners_do_not_depend_on_the_order_of_their_values() -> None:
    values = [{"id": i, "score": s} for i, s in enumerate([5, 9, 9, 1, 5, 9, 2])]
    for combiner, expected in [
        (TopN(2, "score"), [9, 9, 9]),
        (TopN(2, "score", ties=False), [9, 9]),
        (TopN(4, "score"), [9, 9, 9, 5, 5]),
        (MaxBy("score"), [9, 9, 9]),
        (MinBy("score"), [1]),
    ]:
        for order in (values, values[::-1], values[3:] + values[:3]):
            acc = combiner.create()
            for value in order:
                acc = combiner.add(acc, value)
            result = combiner.result(acc)
            assert [v["score"] for v in result] == expected, combiner
            split = combiner.merge(_folded(combiner, order[:3]), _folded(combiner, order[3:]))
            assert combiner.result(split) == result
    assert MaxBy("score", ties=False).result(_folded(MaxBy("score", ties=False), values)) == {
        "id": 1, "score": 9,
    }  # fmt: skip
    assert Collect().result(_folded(Collect(), [3, {"a": 1}, [2]])) == [3, [2], {"a": 1}]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["top", "max", "min"]),
    n=st.integers(1, 4),
    ties=st.booleans(),
    kept=st.lists(st.integers(0, 6), max_size=6),
    batch=st.lists(st.one_of(st.integers(0, 6), st.floats(-3, 3)), max_size=12),
)
def test_a_batch_folds_as_its_values_one_by_one(
    kind: str, n: int, ties: bool, kept: list[int], batch: list[float]
) -> None:
    """``add_all`` (the vectorized path's group fold) equals ``add`` value by value."""
    combiner: TopN = {"top": TopN(n, "s", ties=ties), "max": MaxBy("s", ties=ties),
                      "min": MinBy("s", ties=ties)}[kind]  # fmt: skip
    before = _folded(combiner, [{"s": s, "k": i} for i, s in enumerate(kept)])
    values = [{"s": s, "i": i} for i, s in enumerate(batch)]
    assert combiner.add_all(list(before), values) == _folded(combiner, values, before)


def _folded(combiner: Any, values: list[Any], acc: Any = None) -> Any:
    acc = combiner.create() if acc is None else list(acc)
    for value in values:
        acc = combiner.add(acc, value)
    return acc


def test_names_in_topology_params() -> None:
    assert parse_aggregate("max_by:price").by == "price"  # type: ignore[attr-defined]
    top = parse_aggregate("top_n:3:count")
    assert isinstance(top, TopN) and (top.n, top.by) == (3, "count")
    both = parse_aggregate("count+max_by:price")
    assert isinstance(both, Combined) and isinstance(both.parts["count"], Count)
    for bad in ("top_n:x:count", "max_by", "max_by:price+sum", "collect:3"):
        with pytest.raises(ValueError, match="aggregate"):
            parse_aggregate(bad)


def test_a_score_that_is_not_a_number_dead_letters_its_record() -> None:
    spec = {
        "streams": {"in": {}, "out": {}},
        "computations": {
            "best": {
                "handler": "millrace.dataflow:WindowedAggregation", "inputs": {"in": "key"},
                "outputs": ["out"],
                "params": {"window": "global", "aggregate": "max_by:price", "output": "out"},
            }
        },
    }  # fmt: skip
    h = TestHarness(Topology.from_dict(spec), dead_letters=True)
    h.feed("in", b"a", b'{"price": 3, "id": 1}', 1)
    h.feed("in", b"a", b'{"price": "high", "id": 2}', 2)
    h.run()
    h.advance_watermark(MAX_TIME)
    h.run()
    [pane] = [json.loads(r.value) for r in h.outputs("out")]
    assert pane["value"] == [{"price": 3, "id": 1}]
    assert any("not a number" in letter.error for letter in h.dead_letters("best"))


def test_a_window_read_from_the_record_closes_at_its_field() -> None:
    """The highest bid of each auction among the bids made before it expires (Nexmark
    q4's first step), bids joined with their auction's ``expires`` already."""
    spec = {
        "streams": {"joined": {}, "winners": {}},
        "computations": {
            "winner": {
                "handler": "millrace.dataflow:WindowedAggregation",
                "inputs": {"joined": "json:auction"},
                "outputs": ["winners"],
                "params": {"window": "field:opened:expires", "aggregate": "max_by:price",
                           "output": "winners"},
            }
        },
    }  # fmt: skip
    h = TestHarness(Topology.from_dict(spec))
    bids = [
        (1, 10, 100, 500, 20),
        (1, 12, 100, 500, 35),
        (2, 50, 40, 900, 7),
        (1, 30, 100, 500, 35),
    ]
    for auction, ts, opened, expires, price in bids:
        body = {"auction": auction, "opened": opened, "expires": expires, "price": price, "t": ts}
        h.feed("joined", b"", json.dumps(body).encode(), ts + opened)
    h.run()
    h.advance_watermark(600)
    h.run()
    panes = [json.loads(r.value) for r in h.outputs("winners")]
    assert [(p["window"], [b["t"] for b in p["value"]]) for p in panes] == [
        ([100, 500], [12, 30])
    ], "auction 2's window is open until 900; auction 1's top price is a tie"
    errors = [letter.error for letter in h.dead_letters("winner")]
    assert errors == []
    windows = FieldWindows("expires", "opened")
    cases: list[tuple[object, str]] = [
        ({"opened": 5}, "field 'expires' is None"),
        ({"opened": 5, "expires": 5}, "is empty"),
        ({"opened": 5, "expires": "soon"}, "not a time"),
        ([1, 2], "not a JSON object"),
    ]
    for bad, problem in cases:
        record = Record("joined", b"", json.dumps(bad).encode(), 1)
        with pytest.raises(ValueError, match=problem):
            windows.assign_record(record)
