"""``millrace check`` validates a deployment and its topology without starting anything:
a valid one prints a summary and OK; a typo in a library computation's params, a
deployment setting or a missing file exits 2 naming the problem (issue 36)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

TOPOLOGY = """
[streams.clicks]
[streams.counts]

[computations.counts]
handler = "millrace.dataflow:WindowedAggregation"
intervals = 2
inputs = {{ clicks = "json:page" }}
outputs = ["counts"]
params = {{ {params} }}
"""
DEPLOYMENT = """
topology = "topology.toml"
[injector]
address = "127.0.0.1:7000"
[nodes.counts]
computation = "counts"
intervals = [0, 1]
address = "127.0.0.1:7001"
{extra}
[sinks.counts]
address = "127.0.0.1:7002"
"""


def check(tmp_path: Path, params: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    (tmp_path / "topology.toml").write_text(TOPOLOGY.format(params=params))
    (tmp_path / "deployment.toml").write_text(DEPLOYMENT.format(extra=extra))
    return subprocess.run(
        [sys.executable, "-m", "millrace", "check", "--config", str(tmp_path / "deployment.toml")],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=60,
    )  # fmt: skip


def test_a_valid_deployment_is_summarised(tmp_path: Path) -> None:
    done = check(tmp_path, 'window = "tumbling:1m", aggregate = "count", output = "counts"')
    assert done.returncode == 0, done.stderr
    assert (
        "computation counts: millrace.dataflow:WindowedAggregation, 2 interval(s) on counts"
        in done.stdout
    )
    assert done.stdout.rstrip().endswith("OK: the deployment and its topology are valid")


@pytest.mark.parametrize(
    ("params", "extra", "message"),
    [
        ('windw = "tumbling:1m", output = "counts"', "",
         "has no setting 'windw' (did you mean 'window'?)"),
        ('window = "tumbling:1 minute", output = "counts"', "", "window 'tumbling:1 minute'"),
        ('output = "elsewhere"', "", "output 'elsewhere' is not one of its outputs"),
        ('output = "counts"', "metrics_prot = 9100",
         "[nodes.counts] has unknown setting 'metrics_prot' (did you mean 'metrics_port'?)"),
    ],
)  # fmt: skip
def test_a_problem_is_named_and_exits_2(
    tmp_path: Path, params: str, extra: str, message: str
) -> None:
    done = check(tmp_path, params, extra)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
