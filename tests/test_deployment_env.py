"""Every deployment setting can be overridden from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from millrace.deployment import Deployment, apply_environment


def test_overrides_reach_nested_tables() -> None:
    raw: dict[str, object] = {
        "injector": {"address": "a:1"},
        "nodes": {"counts-a": {"metrics_port": 1}},
    }
    apply_environment(
        raw,
        {
            "MILLRACE__INJECTOR__OUT_OF_ORDERNESS_MS": "2000",
            "MILLRACE__NODES__COUNTS_A__METRICS_PORT": "9101",
            "MILLRACE__AUTHORITY": "h:7",
            "MILLRACE__NODES__COUNTS_A__INTERVALS": "[0, 1]",
            "UNRELATED": "x",
        },
    )
    assert raw == {
        "injector": {"address": "a:1", "out_of_orderness_ms": 2000},
        "nodes": {"counts-a": {"metrics_port": 9101, "intervals": [0, 1]}},
        "authority": "h:7",
    }


def test_load_applies_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "topology.toml").write_text(
        '[streams.in]\n[streams.out]\n[computations.c]\nhandler = "tests.workloads:Poison"\n'
        'inputs = { in = "key" }\noutputs = ["out"]\n'
    )
    (tmp_path / "deployment.toml").write_text(
        'topology = "topology.toml"\n[injector]\naddress = "127.0.0.1:1"\n'
        '[nodes.c]\ncomputation = "c"\nintervals = [0]\naddress = "127.0.0.1:2"\n'
        '[sinks.out]\naddress = "127.0.0.1:3"\n'
    )
    monkeypatch.setenv("MILLRACE__INJECTOR__IDLE_TIMEOUT_MS", "1234")
    monkeypatch.setenv("MILLRACE__SINKS__OUT__ADDRESS", "127.0.0.1:9")
    deployment = Deployment.load(tmp_path / "deployment.toml")
    assert deployment.injector is not None and deployment.injector.idle_timeout_ms == 1234
    assert deployment.sinks["out"] == "127.0.0.1:9"
