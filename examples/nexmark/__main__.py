"""Run the Nexmark queries on the ``dataflow`` library and check each one.

    python -m examples.nexmark

Generates a small Nexmark stream (``events.py``), runs each query of ``queries.py``
in ``TestHarness`` (the events fed in time order, then the input finished: the
watermark goes to the end of time, as ``millrace inject --finish`` does for a
bounded input), and compares what it wrote to ``out`` with the plain-Python answer of
``oracle.py``. Prints one line per query with its size in lines of Python. Exit code 0
only when every query equals its answer.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections.abc import Iterable
from typing import Any

from examples.nexmark import queries
from examples.nexmark.events import Event, generate
from examples.nexmark.oracle import answers
from millrace.computations import MAX_TIME, Topology
from millrace.computations.testing import TestHarness

MAX_LINES = 25
"""Each query is written in fewer lines of Python than this."""


def topology(computations: dict[str, dict[str, Any]]) -> Topology:
    """The query's computations with every stream they name declared."""
    streams = {"persons", "auctions", "bids"}
    for spec in computations.values():
        streams.update(spec["inputs"], spec["outputs"])
    return Topology.from_dict(
        {"streams": {s: {} for s in sorted(streams)}, "computations": computations}
    )


def run(name: str, events: list[Event], *, crash_every: int = 0) -> list[Any]:
    """The query's ``out`` values, parsed, once the whole input is processed (every
    ``crash_every`` events, the harness loses everything not committed)."""
    feeds = [(stream, value, value["dateTime"]) for stream, value in events]
    return harness_outputs(topology(queries.QUERIES[name]()), feeds, crash_every=crash_every)


def harness_outputs(
    topology: Topology, feeds: Iterable[tuple[str, Any, int]], *, crash_every: int = 0
) -> list[Any]:
    """``out``'s values, parsed, once ``feeds`` (stream, JSON value, event time: those of
    the topology's streams, in order) are processed and the input finished; every
    ``crash_every`` feeds the harness loses what is not committed."""
    harness = TestHarness(topology)
    for n, (stream, value, t) in enumerate(feeds, 1):
        if stream in topology.streams:
            harness.feed(stream, b"", json.dumps(value).encode(), t)
        if crash_every and n % crash_every == 0:
            harness.step()
            harness.crash()
    harness.run()
    harness.advance_watermark(MAX_TIME)
    return [json.loads(record.value) for record in harness.outputs("out")]


def result(name: str, outputs: list[Any]) -> Any:
    """The outputs in the form ``oracle.answers`` gives."""
    if name in ("q0", "q1", "q2"):
        return sorted(tuple(sorted(value.items())) for value in outputs)
    if name == "q3":
        return sorted((o["name"], o["city"], o["state"], o["auction"]) for o in outputs)
    if name == "q4":
        return {int(pane["key"]): pane["value"] for pane in outputs}
    if name == "q5":
        return {
            tuple(json.loads(pane["key"])): (
                pane["value"][0]["value"],
                sorted(int(p["key"]) for p in pane["value"]),
            )
            for pane in outputs
        }
    if name == "q6":
        return {o["seller"]: o["average"] for o in outputs}
    if name == "q7":
        return {pane["window"][0]: sorted(tuple(sorted(b.items())) for b in pane["value"])
                for pane in outputs}  # fmt: skip
    if name == "q8":
        return sorted((o["id"], o["name"], o["window"]) for o in outputs)
    return sorted((int(p["key"]), *p["window"], p["value"]) for p in outputs)


def lines_of(name: str) -> int:
    """Lines of Python of the query's function and of the functions it names (and
    :func:`~examples.nexmark.queries.winning_bids`, which q4 and q6 share), docstrings
    aside."""
    query = getattr(queries, name)
    spec = json.dumps(query())
    used = [query, *(f for n, f in vars(queries).items() if f'{queries.M}:{n}"' in spec)]
    if '"in_time"' in spec:
        used.append(queries.winning_bids)
    total = 0
    for function in used:
        [node] = ast.parse(textwrap.dedent(inspect.getsource(function))).body
        assert isinstance(node, ast.FunctionDef)
        first = node.body[0]
        docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        if docstring:
            lines -= (first.end_lineno or first.lineno) - first.lineno + 1
        total += lines
    return total


def main() -> int:
    """Run and check every query; 0 when all equal their answers."""
    events = generate()
    expected = answers(events)
    counts = {s: sum(1 for e in events if e[0] == s) for s in ("persons", "auctions", "bids")}
    print(f"{len(events)} events: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    wrong = []
    for name in queries.QUERIES:
        got = result(name, run(name, events))
        ok = got == expected[name] and lines_of(name) < MAX_LINES
        size = len(got)
        print(f"  {name:4} {lines_of(name):3} lines of Python  {size:5} results  "
              f"{'equal to the plain computation' if ok else 'DIFFERENT'}")  # fmt: skip
        if not ok:
            wrong.append(name)
    if wrong:
        print(f"FAILED: {', '.join(wrong)}")
        return 1
    print(f"OK: {len(queries.QUERIES)} queries equal their plain-Python answers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
