"""The Nexmark queries of ``examples/nexmark`` as topology files for real-process tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from examples.nexmark.queries import QUERIES

SOURCES = ("persons", "auctions", "bids")


def renamed(query: str) -> dict[str, dict[str, Any]]:
    """The query's computations, every stream but the sources prefixed by its name."""

    def name(stream: str) -> str:
        return stream if stream in SOURCES else f"{query}_{stream}"

    computations = {}
    for computation, spec in QUERIES[query]().items():
        params = {k: name(v) if k in ("output", "late_output") else v
                  for k, v in spec["params"].items()}  # fmt: skip
        computations[f"{query}_{computation}"] = {
            **spec,
            "inputs": {name(s): key for s, key in spec["inputs"].items()},
            "outputs": [name(s) for s in spec["outputs"]],
            "params": params,
        }
    return computations


def topology_toml(topology: dict[str, Any]) -> str:
    """The topology as TOML (inline tables: every value is a string, int or table)."""

    def value(v: Any) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    out = [f'[streams."{s}"]' for s in topology["streams"]]
    for name, spec in topology["computations"].items():
        out.append(f'[computations."{name}"]')
        out += [f"{k} = {value(v)}" for k, v in spec.items()]
    return "\n".join(out) + "\n"


Placements = Mapping[str, tuple[str, Sequence[int]]]
"""Node name -> (its computation, its placed intervals)."""


def write_files(
    tmp_path: Path,
    computations: dict[str, dict[str, Any]],
    placements: Placements,
    sink: str,
    ports: Mapping[str, int],
) -> Path:
    """``topology.toml`` and ``deployment.toml`` in ``tmp_path`` (every query's output
    stream to the sink at ``sink``); the deployment file."""
    streams = {s for c in computations.values() for s in [*c["inputs"], *c["outputs"]]}
    topology = {"streams": {s: {} for s in sorted(streams)}, "computations": computations}
    (tmp_path / "topology.toml").write_text(topology_toml(topology))
    lines = ['topology = "topology.toml"', "[injector]",
             f'address = "127.0.0.1:{ports["injector"]}"', "out_of_orderness_ms = 1000",
             "idle_timeout_ms = 3600000"]  # fmt: skip
    for node, (computation, intervals) in placements.items():
        address = f"127.0.0.1:{ports[node]}"
        lines += [f"[nodes.{node}]", f'computation = "{computation}"',
                  f"intervals = {list(intervals)}", f'address = "{address}"']  # fmt: skip
    read = {s for c in computations.values() for s in c["inputs"]}
    outputs = sorted({s for c in computations.values() for s in c["outputs"]} - read)
    lines += [f'[sinks.{stream}]\naddress = "{sink}"' for stream in outputs]
    (tmp_path / "deployment.toml").write_text("\n".join(lines) + "\n")
    return tmp_path / "deployment.toml"


def write_inputs(tmp_path: Path, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Each source stream's events as ``STREAM.jsonl`` for ``millrace inject``."""
    events = list(events)
    for stream in SOURCES:
        (tmp_path / f"{stream}.jsonl").write_text("".join(
            json.dumps({"key": "", "value": value, "ts": value["dateTime"]}) + "\n"
            for s, value in events if s == stream
        ))  # fmt: skip
