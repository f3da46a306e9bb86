"""docs/configuration.md documents every setting the loaders accept, and its examples load.

The settings come from the code, not listed here: the lists the loaders accept
(and refuse everything else by), checked against the dataclasses the tables
become (``InjectorPlacement``, ``NodePlacement``, ``Security``,
``ComputationSpec``). Environment
variables are the ``"MILLRACE_*"`` names in the source.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from millrace.computations._topology import COMPUTATION_SETTINGS, ComputationSpec, Topology
from millrace.deployment import (
    Deployment,
    InjectorPlacement,
    NodePlacement,
    RebalanceSettings,
    apply_environment,
)
from millrace.deployment._placement import (
    INJECTOR_SETTINGS,
    NODE_SETTINGS,
    REBALANCE_SETTINGS,
    SINK_SETTINGS,
    TOP_LEVEL_SETTINGS,
)
from millrace.deployment.security import SETTINGS as SECURITY_SETTINGS
from millrace.deployment.security import Security

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configuration.md"
SOURCE_PACKAGES = (
    "millrace", "computations", "dataflow", "engine", "delivery", "node", "deployment",
    "injector", "sinks", "statestore", "spark_jobs",
)  # fmt: skip


def doc_text() -> str:
    return DOC.read_text()


def section(heading: str) -> str:
    """The body of the ``###`` section titled ``heading`` (up to the next heading)."""
    match = re.search(
        rf"^### {re.escape(heading)}\n(.*?)(?=^#{{1,3}} )", doc_text() + "\n# end", re.M | re.S
    )
    assert match, f"docs/configuration.md has no '### {heading}' section"
    return match.group(1)


def documented_rows(heading: str) -> set[str]:
    """The settings a section's table documents (first cell of each row)."""
    return set(re.findall(r"^\| `([A-Za-z_]+)` \|", section(heading), re.M))


def fields_of(cls: type[Any], *, without: tuple[str, ...] = ()) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - set(without)


EXPECTED: dict[str, Callable[[], set[str]]] = {
    "Top level": lambda: set(TOP_LEVEL_SETTINGS),
    "`[injector]`": lambda: fields_of(InjectorPlacement),
    "`[nodes.NAME]`": lambda: fields_of(NodePlacement, without=("name",)),
    "`[sinks.STREAM]`": lambda: set(SINK_SETTINGS),
    "`[security]`": lambda: set(SECURITY_SETTINGS),
    "`[rebalance]`": lambda: fields_of(RebalanceSettings),
    "`[computations.NAME]`": lambda: set(COMPUTATION_SETTINGS),
}


def test_the_setting_lists_are_what_the_tables_become() -> None:
    """The loader refuses what these lists lack; they must match the dataclasses."""
    assert {
        "topology", "authority", "nodes", "sinks", "injector", "security", "rebalance",
    } == set(TOP_LEVEL_SETTINGS)  # fmt: skip
    assert set(REBALANCE_SETTINGS) == fields_of(RebalanceSettings)
    assert set(INJECTOR_SETTINGS) == fields_of(InjectorPlacement)
    assert set(NODE_SETTINGS) == fields_of(NodePlacement, without=("name",))
    assert {"address", "path", "format", "dedup_retention_ms", "external", "metrics_port"} == set(
        SINK_SETTINGS
    )
    assert fields_of(ComputationSpec, without=("name",)) == set(COMPUTATION_SETTINGS)


@pytest.mark.parametrize("heading", sorted(EXPECTED))
def test_each_table_documents_exactly_the_accepted_settings(heading: str) -> None:
    expected = EXPECTED[heading]()
    documented = documented_rows(heading)
    assert not expected - documented, f"{heading}: undocumented settings {expected - documented}"
    assert not documented - expected, (
        f"{heading}: documented but not accepted {documented - expected}"
    )


def test_streams_section_exists() -> None:
    assert "no settings" in section("`[streams.NAME]`")


def source_environment_variables() -> set[str]:
    names: set[str] = set()
    for package in SOURCE_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "_pb2" in path.name:
                continue
            names |= set(re.findall(r"[\"'](MILLRACE_[A-Z][A-Z_]*)[\"']", path.read_text()))
    return names


def test_every_environment_variable_is_documented() -> None:
    in_code = source_environment_variables()
    assert {"MILLRACE_TOKEN", "MILLRACE_DATA_DIR", "MILLRACE_CONFIG"} <= in_code
    documented = set(
        re.findall(r"^\| `(MILLRACE_[A-Z_]+)` \|", section("Dedicated variables"), re.M)
    )
    assert not in_code - documented, f"undocumented variables: {in_code - documented}"
    assert not documented - in_code, f"documented variables nobody reads: {documented - in_code}"


def toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", doc_text(), re.S)


def topology_block() -> str:
    blocks = [b for b in toml_blocks() if "[computations." in b]
    assert len(blocks) == 1, "one topology example"
    return blocks[0]


def config_blocks() -> list[str]:
    blocks = [b for b in toml_blocks() if "[computations." not in b]
    assert len(blocks) >= 2, "a complete and a minimal configuration example"
    return blocks


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MILLRACE"):
            monkeypatch.delenv(name)


def test_the_topology_example_loads(tmp_path: Path) -> None:
    (tmp_path / "topology.toml").write_text(topology_block())
    topology = Topology.load(tmp_path / "topology.toml")
    assert Topology.from_dict(tomllib.loads(topology_block())) == topology
    assert set(topology.computations) == {"page_counts", "user_pages"}


@pytest.mark.usefixtures("clean_environment")
@pytest.mark.parametrize("index", range(len(config_blocks())))
def test_every_configuration_example_loads(tmp_path: Path, index: int) -> None:
    (tmp_path / "topology.toml").write_text(topology_block())
    (tmp_path / "config.toml").write_text(config_blocks()[index])
    deployment = Deployment.load(tmp_path / "config.toml")
    raw = tomllib.loads(config_blocks()[index])
    security = Security.from_settings(raw.get("security", {}), tmp_path, environ={})
    same = Deployment.from_dict(deployment.topology, raw, security=security)
    assert same.nodes == deployment.nodes and same.sinks == deployment.sinks


def test_the_complete_example_sets_every_setting() -> None:
    raw = tomllib.loads(config_blocks()[0])
    assert set(TOP_LEVEL_SETTINGS) <= set(raw)
    assert fields_of(InjectorPlacement) <= set(raw["injector"])
    assert fields_of(NodePlacement, without=("name",)) <= set().union(*raw["nodes"].values())
    assert set(SINK_SETTINGS) <= set().union(*raw["sinks"].values())
    assert set(SECURITY_SETTINGS) <= set(raw["security"])
    assert set(REBALANCE_SETTINGS) <= set(raw["rebalance"])
    computations = tomllib.loads(topology_block())["computations"].values()
    assert set(COMPUTATION_SETTINGS) <= set().union(*computations)


def test_documented_override_variables_name_real_settings() -> None:
    """Each ``MILLRACE__...`` name in the docs lands on a setting of the complete example."""
    complete = tomllib.loads(config_blocks()[0])
    names = set(re.findall(r"`(MILLRACE__[A-Z0-9_]+)", doc_text()))
    assert len(names) > 20
    for name in sorted(names):
        if name.endswith("__") or name.endswith("_"):
            continue  # a prefix such as MILLRACE__INJECTOR__...
        concrete = name.replace("__NAME__", "__PAGE_COUNTS_0__").replace(
            "__STREAM__", "__PAGE_WINDOW_COUNTS__"
        )
        raw: dict[str, Any] = tomllib.loads(config_blocks()[0])
        apply_environment(raw, {concrete: "1"})
        added = _added_keys(complete, raw)
        assert not added, f"{name} does not name an existing setting (it adds {added})"


def _added_keys(before: dict[str, Any], after: dict[str, Any], prefix: str = "") -> list[str]:
    added = []
    for key, value in after.items():
        if key not in before:
            added.append(prefix + key)
        elif isinstance(value, dict) and isinstance(before[key], dict):
            added += _added_keys(before[key], value, f"{prefix}{key}.")
    return added
