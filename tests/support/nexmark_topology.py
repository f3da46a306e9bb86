"""The Nexmark queries of ``examples/nexmark`` as topology files for real-process tests."""

from __future__ import annotations

import json
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
