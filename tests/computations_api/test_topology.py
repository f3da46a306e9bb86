"""Topology validation names every culprit; the user API stays small and isolated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from millrace import computations
from millrace.computations import (
    JSON,
    Computation,
    Context,
    ProduceError,
    ProtobufSerde,
    Record,
    TimerError,
    Topology,
    TopologyError,
    interval_of,
)
from millrace.computations.testing import TestHarness
from millrace.wire.v1 import record_pb2


class NoHandlers(Computation):
    """Implements nothing."""


class ProducesElsewhere(Computation):
    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.produce("not_declared", ctx.key, b"")


class ProducesBig(Computation):
    """Produces a record of the size its input's value names (a decimal byte count)."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.produce("b", ctx.key, b"x" * int(record.value))


class TimerWithoutHandler(Computation):
    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.set_timer("t", 5)


def topology(computations_: dict[str, Any], streams: tuple[str, ...] = ("a", "b", "c")) -> Topology:
    return Topology.from_dict({"streams": {s: {} for s in streams}, "computations": computations_})


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(TopologyError) as raised:
        topology(raw)
    return raised.value.problems


def test_unknown_streams_are_named() -> None:
    problems = problems_of(
        {
            "c1": {
                "handler": "tests.workloads:Poison",
                "inputs": {"nope": "key"},
                "outputs": ["gone"],
            }
        }
    )
    assert "computation 'c1' reads unknown stream 'nope'" in problems
    assert "computation 'c1' produces unknown stream 'gone'" in problems


def test_cycles_are_named() -> None:
    problems = problems_of(
        {
            "x": {"handler": "tests.workloads:Poison", "inputs": {"a": "key"}, "outputs": ["b"]},
            "y": {"handler": "tests.workloads:Poison", "inputs": {"b": "key"}, "outputs": ["a"]},
        }
    )
    assert any(p.startswith("cycle between computations: x -> y -> x") for p in problems)


def test_missing_handlers_are_named() -> None:
    problems = problems_of(
        {
            "gone": {"handler": "tests.nowhere:Missing", "inputs": {"a": "key"}},
            "empty": {
                "handler": "tests.computations_api.test_topology:NoHandlers",
                "inputs": {"a": "key"},
            },
            "nothing": {"inputs": {"a": "key"}},
        }
    )
    assert any(
        p.startswith("computation 'gone': handler 'tests.nowhere:Missing' cannot") for p in problems
    )
    assert any("does not implement process_record" in p and "'empty'" in p for p in problems)
    assert "computation 'nothing' has no handler (module:Class)" in problems


def test_bad_settings_are_named() -> None:
    problems = problems_of(
        {
            "c": {
                "handler": "tests.workloads:Poison",
                "inputs": {"a": "json:"},
                "intervals": 0,
            },
            "d": {"handler": "tests.workloads:Poison", "inputs": {"a": "key"}, "shards": 2},
        }
    )
    assert "computation 'c': intervals must be a positive integer" in problems
    assert "computation 'd' has unknown setting 'shards'" in problems


def test_toml_topology_loads(tmp_path: Path) -> None:
    path = tmp_path / "topology.toml"
    path.write_text(
        """
[streams.events]
[streams.window_counts]
[streams.window_totals]

[computations.counts]
handler = "tests.workloads:WindowCounts"
intervals = 3
inputs = { events = "key" }
outputs = ["window_counts"]

[computations.totals]
handler = "tests.workloads:WindowTotals"
inputs = { window_counts = "json:window" }
outputs = ["window_totals"]
"""
    )
    loaded = Topology.load(path)
    assert loaded.sources() == ("events",)
    assert loaded.sinks() == ("window_totals",)
    assert loaded.upstream_computations("totals") == ["counts"]
    assert loaded.computations["counts"].intervals == 3


def single(handler: str) -> TestHarness:
    return TestHarness(
        topology(
            {"c": {"handler": handler, "inputs": {"a": "key"}, "outputs": ["b"], "max_attempts": 1}}
        ),
        dead_letters=True,
    )


def test_producing_to_an_undeclared_stream_dead_letters_with_the_reason() -> None:
    harness = single("tests.computations_api.test_topology:ProducesElsewhere")
    harness.feed("a", b"k", b"", 1)
    harness.run()
    [letter] = harness.dead_letters("c")
    assert ProduceError.__name__ in letter.error
    assert "'not_declared'" in letter.error


def test_a_record_over_the_produced_limit_dead_letters_and_loses_nothing_else() -> None:
    """A record too big for one delivery message fails its input record with the reason
    (it would otherwise be resent without end); records around it go through."""
    harness = single("tests.computations_api.test_topology:ProducesBig")
    harness.feed("a", b"k1", b"10", 1)
    harness.feed("a", b"k2", str(computations.MAX_PRODUCED_BYTES).encode(), 2)
    harness.feed("a", b"k3", b"20", 3)
    harness.run()
    [letter] = harness.dead_letters("c")
    assert ProduceError.__name__ in letter.error and "keep big payloads out" in letter.error
    assert letter.record.key == b"k2"
    assert [(r.key, len(r.value)) for r in harness.outputs("b")] == [(b"k1", 10), (b"k3", 20)]


def test_timer_without_handler_is_refused() -> None:
    harness = single("tests.computations_api.test_topology:TimerWithoutHandler")
    harness.feed("a", b"k", b"", 1)
    harness.run()
    [letter] = harness.dead_letters("c")
    assert TimerError.__name__ in letter.error


def test_serdes_round_trip() -> None:
    assert JSON.loads(JSON.dumps({"b": [1, 2], "a": None})) == {"a": None, "b": [1, 2]}
    serde = ProtobufSerde(record_pb2.Record)
    message = record_pb2.Record(key=b"k", event_time_ms=5)
    assert serde.loads(serde.dumps(message)) == message
    with pytest.raises(TypeError):
        computations.BYTES.dumps("text")  # type: ignore[arg-type]


def test_intervals_split_keys_evenly_and_stably() -> None:
    counts = [0, 0, 0, 0]
    for i in range(4000):
        counts[interval_of(f"key{i}".encode(), 4)] += 1
    assert all(900 < c < 1100 for c in counts)
    assert interval_of(b"alice", 4) == interval_of(b"alice", 4)


def test_user_api_runs_without_grpc_or_rocksdb() -> None:
    code = (
        "import sys\n"
        "sys.modules['grpc'] = None\n"
        "sys.modules['rocksdict'] = None\n"
        "from computations.testing import TestHarness\n"
        "from tests.workloads import two_stage_topology\n"
        "h = TestHarness(two_stage_topology())\n"
        "h.feed('events', b'k', b'', 5)\n"
        "h.advance_watermark(10**6)\n"
        "print(len(h.outputs('window_totals')))\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


class ProducesWrongTypes(Computation):
    """Produces what the record's value names: a str key, a dict value, a text time."""

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.value == b"str key":
            ctx.produce("b", "k", b"v")  # type: ignore[call-overload]
        elif record.value == b"dict value":
            ctx.produce("b", b"k", {"a": 1})  # type: ignore[call-overload]
        else:
            ctx.produce("b", b"k", b"v", event_time_ms="soon")  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"str key", "the key must be bytes, not str: encode it"),
        (b"dict value", "the value must be bytes, not dict: serialize it"),
        (b"text time", "event_time_ms must be an integer (ms), not str 'soon'"),
    ],
)
def test_producing_the_wrong_types_says_what_to_do(value: bytes, message: str) -> None:
    harness = single("tests.computations_api.test_topology:ProducesWrongTypes")
    harness.feed("a", b"k", value, 1)
    harness.run()
    [letter] = harness.dead_letters("c")
    assert "ProduceError" in letter.error and message in letter.error
