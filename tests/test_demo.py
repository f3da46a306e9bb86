"""The README's first command runs the demo; the demo checks itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow


def test_demo_results_equal_the_independent_computation(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples.clickstream.demo", "--work", str(tmp_path / "demo")],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 new, 11336 already in the log" in result.stdout, (
        "the retried submission added nothing"
    )
    assert "OK: window counts and top pages equal an independent computation" in result.stdout
