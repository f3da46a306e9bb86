"""The deployment file is read strictly, and clients read it without the topology.

A typo (``metrics_prot``) used to be ignored, so a node ran without metrics and
nothing said why; a missing setting raised a bare ``KeyError('address')``.
Every problem now names its table, and all come together.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from millrace.deployment import Deployment, DeploymentError, Placement

TOPOLOGY = """
[streams.in]
[streams.out]
[computations.c]
handler = "tests.workloads:Poison"
inputs = { in = "key" }
outputs = ["out"]
"""

GOOD = """
topology = "topology.toml"
[injector]
address = "127.0.0.1:1"
[nodes.c-0]
computation = "c"
intervals = [0]
address = "127.0.0.1:2"
[sinks.out]
address = "127.0.0.1:3"
"""


@pytest.fixture
def clean_millrace_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``MILLRACE_*`` override of the test's own file."""
    for name in list(os.environ):
        if name.startswith("MILLRACE"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, deployment: str, topology: str = TOPOLOGY) -> Path:
    (tmp_path / "topology.toml").write_text(topology)
    path = tmp_path / "deployment.toml"
    path.write_text(deployment)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(DeploymentError) as raised:
        Deployment.load(path)
    return raised.value.problems


@pytest.mark.usefixtures("clean_millrace_environment")
def test_a_good_file_loads_as_deployment_and_as_placement(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    deployment = Deployment.load(path)
    placement = Placement.load(path)
    assert placement.nodes == deployment.nodes and placement.sinks == deployment.sinks
    assert placement.injector == deployment.injector
    assert deployment.address_of("c", 0) == "127.0.0.1:2"
    assert deployment.address_of("sink:out", 0) == "127.0.0.1:3"


@pytest.mark.usefixtures("clean_millrace_environment")
def test_every_problem_names_its_table_and_all_come_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'topology = "topology.toml"\ntopolgy_typo = 1\n'
        '[injector]\naddress = "127.0.0.1:1"\nidle_timeout = 5\n'
        '[nodes.c-0]\ncomputation = "c"\nintervals = "0"\nmetrics_prot = 9999\n'
        '[sinks.out]\naddress = 7\nformat = "csv"\n',
    )
    problems = problems_of(path)
    assert "the top level has unknown setting 'topolgy_typo' (did you mean 'topology'?)" in (
        problems
    )
    assert "[injector] has unknown setting 'idle_timeout' (did you mean 'idle_timeout_ms'?)" in (
        problems
    )
    assert "[nodes.c-0] has unknown setting 'metrics_prot' (did you mean 'metrics_port'?)" in (
        problems
    )
    assert "[nodes.c-0] is missing setting 'address'" in problems
    assert "[nodes.c-0] intervals must be an array of integers, not '0'" in problems
    assert "[sinks.out] address must be a string, not 7" in problems
    assert '[sinks.out] format must be "jsonl" or "parquet", not \'csv\'' in problems
    assert len(problems) == 7


@pytest.mark.usefixtures("clean_millrace_environment")
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("metrics_port = 70000", "[nodes.c-0] metrics_port must be a port (0..65535), not 70000"),
        ("epoch = 0", "[nodes.c-0] epoch must be an integer >= 1, not 0"),
        ("dedup_retention_ms = true", "[nodes.c-0] dedup_retention_ms must be an integer >= 0"),
    ],
)
def test_values_of_the_wrong_kind_are_refused(tmp_path: Path, setting: str, message: str) -> None:
    path = write(tmp_path, GOOD.replace("intervals = [0]", f"intervals = [0]\n{setting}"))
    assert any(problem.startswith(message) for problem in problems_of(path))


@pytest.mark.usefixtures("clean_millrace_environment")
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('external = "yes"', "[sinks.out] external must be true or false, not 'yes'"),
        ("metrics_port = -1", "[sinks.out] metrics_port must be an integer >= 0, not -1"),
    ],
)
def test_sink_values_of_the_wrong_kind_are_refused(
    tmp_path: Path, setting: str, message: str
) -> None:
    path = write(tmp_path, GOOD.replace("[sinks.out]", f"[sinks.out]\n{setting}"))
    assert message in problems_of(path)


@pytest.mark.usefixtures("clean_millrace_environment")
def test_an_external_sink_is_left_to_its_own_process(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("[sinks.out]", "[sinks.out]\nexternal = true"))
    assert Placement.load(path).external_sinks == {"out"}
    assert Placement.load(write(tmp_path, GOOD)).external_sinks == frozenset()


@pytest.mark.usefixtures("clean_millrace_environment")
def test_a_topology_problem_names_the_topology_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, TOPOLOGY.replace("tests.workloads:Poison", "nowhere:Nothing"))
    (problem,) = problems_of(path)
    assert problem.startswith("topology.toml: computation 'c': handler 'nowhere:Nothing'")


@pytest.mark.usefixtures("clean_millrace_environment")
def test_a_placement_does_not_read_the_topology(tmp_path: Path) -> None:
    """What clients read: addresses and security, with no user code imported."""
    path = write(tmp_path, GOOD, TOPOLOGY.replace("tests.workloads:Poison", "nowhere:Nothing"))
    assert Placement.load(path).sinks == {"out": "127.0.0.1:3"}


@pytest.mark.usefixtures("clean_millrace_environment")
def test_a_node_may_have_no_intervals_and_rebalancing_is_read(tmp_path: Path) -> None:
    spare = '[nodes.c-spare]\ncomputation = "c"\naddress = "127.0.0.1:4"\n'
    rebalance = "[rebalance]\nenabled = true\nperiod_ms = 2000\n"
    deployment = Deployment.load(write(tmp_path, GOOD + spare + rebalance))
    assert deployment.nodes["c-spare"].intervals == ()
    assert deployment.rebalance.enabled and deployment.rebalance.period_ms == 2000
    assert deployment.rebalance.max_moves_per_minute == 2, "the rest keep their defaults"
    assert not Deployment.load(write(tmp_path, GOOD)).rebalance.enabled, "off by default"
    problems = problems_of(write(tmp_path, GOOD + "[rebalance]\nperiod_ms = 5\nenable = true\n"))
    assert problems == [
        "[rebalance] has unknown setting 'enable' (did you mean 'enabled'?)",
        "[rebalance] period_ms must be an integer >= 100, not 5",
    ]
