"""Distinct counts, quantiles and top-k per window (exact, and Apache DataSketches),
through the real engine in ``TestHarness``; sketches merge when sessions do."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from typing import Any

from millrace.computations import Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import (
    Accumulation,
    ApproxDistinct,
    ApproxQuantiles,
    Combiner,
    Distinct,
    Pane,
    Sessions,
    TopK,
    Tumbling,
    WindowedAggregation,
)

WINDOW = 1_000


def run(
    aggregate: Combiner, events: list[tuple[bytes, int, Any]], window: Any = None
) -> list[Pane]:
    class Aggregation(WindowedAggregation):
        field = "x"
        output = "out"
        accumulation = Accumulation.ACCUMULATING
        allowed_lateness_ms = 10 * WINDOW

    Aggregation.window = window or Tumbling(WINDOW)
    Aggregation.aggregate = aggregate
    globals()["Aggregation"] = Aggregation
    harness = TestHarness(
        Topology.from_dict(
            {
                "streams": {"in": {}, "out": {}},
                "computations": {
                    "agg": {
                        "handler": f"{__name__}:Aggregation",
                        "inputs": {"in": "key"},
                        "outputs": ["out"],
                    }
                },
            }
        )
    )
    for key, ts, x in events:
        harness.feed("in", key, json.dumps({"x": x}).encode(), ts)
    harness.advance_watermark(100 * WINDOW)
    return [Pane.decode(r.value) for r in harness.outputs("out")]


def final(panes: list[Pane]) -> dict[Any, Any]:
    last: dict[Any, tuple[int, Any]] = {}
    for pane in panes:
        at = (pane.key, pane.window.start)
        if pane.index >= last.get(at, (-1, None))[0]:
            last[at] = (pane.index, pane.value)
    return {at: value for at, (_, value) in last.items()}


def test_exact_distinct_counts_per_window() -> None:
    rng = random.Random(1)
    events = [(rng.choice([b"a", b"b"]), rng.randrange(3 * WINDOW), rng.choice("pqrstu"))
              for _ in range(300)]  # fmt: skip
    expected: dict[Any, set[str]] = defaultdict(set)
    for key, ts, x in events:
        expected[(key, ts - ts % WINDOW)].add(x)
    assert final(run(Distinct(), events)) == {at: len(v) for at, v in expected.items()}


def test_approximate_distinct_count_is_within_its_error() -> None:
    events = [(b"k", i % WINDOW, f"user{i}") for i in range(5_000)]
    [estimate] = final(run(ApproxDistinct(lg_k=12), events)).values()
    assert abs(estimate - 5_000) <= 5_000 * 0.05


def test_quantiles_and_top_k() -> None:
    events = [(b"k", i % WINDOW, float(i)) for i in range(1, 1001)]
    [quantiles] = final(run(ApproxQuantiles((0.5, 0.9)), events)).values()
    assert abs(quantiles["0.5"] - 500) <= 20 and abs(quantiles["0.9"] - 900) <= 20
    names = ["home"] * 50 + ["cart"] * 30 + ["faq"] * 10 + list("abcdefgh")
    skewed = [(b"k", i % WINDOW, name) for i, name in enumerate(names)]
    [top] = final(run(TopK(k=3), skewed)).values()
    assert top == [["home", 50], ["cart", 30], ["faq", 10]]


def test_sketches_merge_with_sessions() -> None:
    rng = random.Random(2)
    times = sorted(rng.sample(range(5 * WINDOW), 60))
    events = [(b"k", ts, f"v{rng.randrange(20)}") for ts in times]
    rng.shuffle(events)  # out-of-order records bridge sessions: their sketches merge
    gap = 200
    sessions: list[list[tuple[int, str]]] = []
    for ts, x in sorted((ts, x) for _, ts, x in events):
        if sessions and ts < sessions[-1][-1][0] + gap:
            sessions[-1].append((ts, x))
        else:
            sessions.append([(ts, x)])
    expected = {(b"k", s[0][0]): len({x for _, x in s}) for s in sessions}
    assert final(run(Distinct(), events, Sessions(gap))) == expected
    approx = final(run(ApproxDistinct(), events, Sessions(gap)))
    assert approx == expected, "HLL is exact at these cardinalities"
    assert Counter(isinstance(v, int) for v in approx.values()) == Counter({True: len(expected)})
