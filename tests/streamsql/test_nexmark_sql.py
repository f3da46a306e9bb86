"""The Nexmark queries in the nexmark project's Flink SQL (``examples/nexmark/sql/``),
planned by ``millrace.streamsql`` and run by the node's engine in ``TestHarness``
(crashing and resuming too), against answers computed in plain Python
(``tests/streamsql/_nexmark_answers.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from examples.nexmark.events import Event, generate
from tests.streamsql._nexmark_answers import QUERIES, answer, result
from tests.streamsql._run import sql_outputs

SQL = Path(__file__).resolve().parents[2] / "examples" / "nexmark" / "sql"
EVENTS = generate()
CRASHES = {"q0": 97, "q3": 83, "q4": 89, "q5": 71, "q6": 67, "q8": 59, "q11": 61}
"""Every how many events a crash loses what is not committed, for the queries run so."""


def query_sql(query: str) -> str:
    """The tables and the query, as one SQL text."""
    return (SQL / "ddl.sql").read_text() + (SQL / f"{query}.sql").read_text()


def run_sql(query: str, events: list[Event], *, crash_every: int = 0) -> list[dict[str, Any]]:
    """The rows the query writes to ``out`` once the whole input is processed."""
    feeds = [(stream, value, value["dateTime"]) for stream, value in events]
    return sql_outputs(query_sql(query), feeds, crash_every=crash_every)


@pytest.mark.parametrize(
    ("query", "crash_every"),
    [(q, 0) for q in QUERIES] + [(q, n) for q, n in CRASHES.items()],
)
def test_each_query_equals_its_plain_python_answer(query: str, crash_every: int) -> None:
    expected = answer(query, EVENTS)
    assert expected, "the events give the query something to find"
    assert result(query, run_sql(query, EVENTS, crash_every=crash_every)) == expected
