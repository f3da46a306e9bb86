"""The Nexmark queries of ``examples/nexmark`` on other streams than the example's own,
with the harness crashing (everything not committed lost, deliveries retried) along
the way: each query's output equals its plain-Python answer."""

from __future__ import annotations

import pytest

from examples.nexmark.__main__ import MAX_LINES, lines_of, result, run
from examples.nexmark.events import generate
from examples.nexmark.oracle import answers
from examples.nexmark.queries import QUERIES


@pytest.mark.parametrize("seed", [1, 2])
def test_every_query_equals_its_answer_across_crashes(seed: int) -> None:
    events = generate(2_000, seed=seed)
    expected = answers(events)
    for name in QUERIES:
        assert result(name, run(name, events, crash_every=97)) == expected[name], name


def test_every_query_is_short() -> None:
    assert all(lines_of(name) < MAX_LINES for name in QUERIES)
