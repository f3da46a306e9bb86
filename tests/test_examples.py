"""Every runnable example in ``examples/`` (a package with a ``__main__``: ``python -m
examples.NAME``) runs in ``TestHarness``, prints its results and checks them against
its own plain-Python computation. The click-stream demo, which starts real processes,
is ``tests/test_demo.py``."""

from __future__ import annotations

import importlib
import time

import pytest

from tests.support import ROOT

EXAMPLES = sorted(path.parent.name for path in (ROOT / "examples").glob("*/__main__.py"))


def test_the_examples_are_found() -> None:
    assert {"session_histogram", "cdc_enrichment", "order_shipments"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_runs_and_equals_its_plain_computation(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module(f"examples.{name}.__main__").main
    started = time.monotonic()
    assert main() == 0, capsys.readouterr().out
    assert time.monotonic() - started < 10, "an example stays quick"
    assert "OK: " in capsys.readouterr().out
