"""``millrace watermarks`` names what holds each computation back (issue 36): the input
with the lowest watermark, followed upstream to its source, from the topology file read
as plain TOML (no user code imported)."""

from __future__ import annotations

from pathlib import Path

from millrace.commands.watermarks import held_by, inputs_of
from millrace.computations import MAX_TIME
from millrace.deployment import Placement

TOPOLOGY = """
[streams]
clicks = {}
users = {}
sessions = {}
alerts = {}

[computations.sessionize]
handler = "nowhere.at_all:NotImported"
inputs = { clicks = "key" }
outputs = ["sessions"]

[computations.fraud]
handler = "nowhere.at_all:NotImported"
inputs = { sessions = "key", users = "key" }
outputs = ["alerts"]
"""


def placement(tmp_path: Path) -> Placement:
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    (tmp_path / "deployment.toml").write_text(
        'topology = "topology.toml"\n[nodes.a]\ncomputation = "fraud"\nintervals = [0]\n'
        'address = "127.0.0.1:1"\n[sinks.alerts]\naddress = "127.0.0.1:2"\n'
    )
    return Placement.load(tmp_path / "deployment.toml")


def test_inputs_are_read_without_importing_the_handlers(tmp_path: Path) -> None:
    assert inputs_of(placement(tmp_path)) == {
        "sessionize": ["source:clicks"],
        "fraud": ["sessionize", "source:users"],
    }
    assert inputs_of(None) == {}


def test_an_idle_table_is_named_as_the_holder(tmp_path: Path) -> None:
    inputs = inputs_of(placement(tmp_path))
    marks = {"source:clicks": 5_000, "source:users": 1_000, "sessionize": 5_000, "fraud": 1_000}
    assert held_by("fraud", marks, inputs) == "source:users"
    assert held_by("sessionize", marks, inputs) == "source:clicks"


def test_a_holder_upstream_is_followed_to_its_source(tmp_path: Path) -> None:
    inputs = inputs_of(placement(tmp_path))
    marks = {"source:clicks": 2_000, "source:users": 9_000, "sessionize": 2_000, "fraud": 2_000}
    assert held_by("fraud", marks, inputs) == "source:clicks via sessionize"
    marks["sessionize"] = 1_500  # sessionize's own unacknowledged work is lower
    marks["fraud"] = 1_500
    assert held_by("fraud", marks, inputs) == "sessionize's pending work"


def test_own_pending_work_unknown_inputs_and_the_end_of_time(tmp_path: Path) -> None:
    inputs = inputs_of(placement(tmp_path))
    marks = {"source:clicks": 5_000, "source:users": 5_000, "sessionize": 5_000, "fraud": 4_000}
    assert held_by("fraud", marks, inputs) == "its own pending work"
    assert held_by("fraud", {"fraud": 4_000}, inputs) == "-"
    assert held_by("fraud", {**marks, "fraud": MAX_TIME}, inputs) == "-"
    assert held_by("unknown", marks, inputs) == "-"
