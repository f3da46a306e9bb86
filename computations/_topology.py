"""The topology: streams, computations, their inputs (with key extractors) and outputs.

Loaded from a TOML file or a dict and validated at once: every problem is
reported together, each naming its culprit::

    [streams.clicks]
    [streams.page_counts]

    [computations.window_counts]
    handler = "examples.clicks:WindowCounts"   # module:Class, a Computation subclass
    intervals = 2                               # key intervals (shards)
    inputs = { clicks = "json:page" }           # stream -> key extractor
    outputs = ["page_counts"]
    productions = "strong"                      # or "weak"
    weak_threshold_ms = 1000
    max_attempts = 3                            # then dead-letter the record
    dead_letter_retention_ms = 604800000        # dead letters kept 7 days (0: forever)
    params = { window_ms = 60000 }              # passed to Computation.setup

Streams no computation produces are *sources* (fed by the injector); streams
no computation consumes are *sinks*.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from millrace.computations._computation import Computation
from millrace.computations._keys import KeyExtractor, import_object, load_key_extractor
from millrace.computations.errors import TopologyError

Productions = Literal["strong", "weak"]

DEAD_LETTER_RETENTION_MS = 7 * 24 * 3600 * 1000
"""How long a dead letter is kept by default: a week, as a DLQ topic's retention."""

COMPUTATION_SETTINGS = frozenset(
    {
        "handler",
        "inputs",
        "outputs",
        "intervals",
        "productions",
        "weak_threshold_ms",
        "max_attempts",
        "dead_letter_retention_ms",
        "params",
    }
)
"""The settings a ``[computations.NAME]`` table accepts (docs/configuration.md)."""


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    """One input stream of a computation and how its records are keyed."""

    stream: str
    key: str = "key"

    @property
    def keyed_as_sent(self) -> bool:
        """Whether records are keyed by their own key (what native code can hash alone)."""
        return self.key == "key"


@dataclass(frozen=True, kw_only=True)
class ComputationSpec:
    """One computation of the topology."""

    name: str
    handler: str | type[Computation]
    """``module:Class`` (what node processes import), or the class itself (in-process)."""
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...] = ()
    intervals: int = 1
    productions: Productions = "strong"
    weak_threshold_ms: int = 1000
    max_attempts: int = 3
    dead_letter_retention_ms: int = DEAD_LETTER_RETENTION_MS
    """How long a dead letter is kept after it failed (0: until deleted by hand)."""
    params: Mapping[str, Any] = field(default_factory=dict)

    def input_streams(self) -> tuple[str, ...]:
        """Names of the streams this computation consumes."""
        return tuple(spec.stream for spec in self.inputs)


@dataclass(frozen=True, kw_only=True)
class Topology:
    """A validated topology. Build with :meth:`from_dict` or :meth:`load`."""

    streams: tuple[str, ...]
    computations: Mapping[str, ComputationSpec]

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        """Read and validate a TOML topology file.

        Its handlers and key extractors are imported with the file's directory on
        the module search path (after everything else, so an installed package of
        the same name wins), as ``python -m`` finds modules beside the working
        directory: a project keeps ``topology.toml`` beside its ``myapp/`` and
        needs no ``PYTHONPATH``."""
        with open(path, "rb") as handle:
            raw = tomllib.load(handle)
        add_module_directory(Path(path).resolve().parent)
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Topology:
        """Validate a topology given as plain data (the TOML layout)."""
        problems: list[str] = []
        streams = tuple(raw.get("streams", {}))
        specs: dict[str, ComputationSpec] = {}
        for name, body in raw.get("computations", {}).items():
            spec = _parse_computation(name, body, problems)
            if spec is not None:
                specs[name] = spec
        topology = cls(streams=streams, computations=specs)
        problems.extend(topology._problems())
        if problems:
            raise TopologyError(problems)
        return topology

    def _problems(self) -> list[str]:
        problems: list[str] = []
        known = set(self.streams)
        if not self.computations:
            problems.append("the topology has no computations")
        for spec in self.computations.values():
            for stream in spec.input_streams():
                if stream not in known:
                    problems.append(f"computation {spec.name!r} reads unknown stream {stream!r}")
            for stream in spec.outputs:
                if stream not in known:
                    problems.append(f"computation {spec.name!r} produces unknown stream {stream!r}")
            for extractor in spec.inputs:
                try:
                    load_key_extractor(extractor.key)
                except ValueError as exc:
                    problems.append(f"computation {spec.name!r}, input {extractor.stream!r}: {exc}")
            problems.extend(_handler_problems(spec))
        cycle = self._find_cycle()
        if cycle:
            problems.append("cycle between computations: " + " -> ".join(cycle))
        return problems

    def _find_cycle(self) -> list[str]:
        downstream = {name: self.consumers_of_outputs(name) for name in self.computations}
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(name: str) -> list[str]:
            state[name] = 1
            path.append(name)
            for nxt in downstream[name]:
                if state.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if nxt not in state and (found := visit(nxt)):
                    return found
            path.pop()
            state[name] = 2
            return []

        for name in self.computations:
            if name not in state and (found := visit(name)):
                return found
        return []

    def consumers(self, stream: str) -> list[ComputationSpec]:
        """Computations that read ``stream``."""
        return [spec for spec in self.computations.values() if stream in spec.input_streams()]

    def consumers_of_outputs(self, name: str) -> list[str]:
        """Computations fed by any output of computation ``name``."""
        return sorted(
            {
                consumer.name
                for s in self.computations[name].outputs
                for consumer in self.consumers(s)
            }
        )

    def producers(self, stream: str) -> list[ComputationSpec]:
        """Computations that write ``stream``."""
        return [spec for spec in self.computations.values() if stream in spec.outputs]

    def sources(self) -> tuple[str, ...]:
        """Streams fed from outside (by the injector)."""
        return tuple(s for s in self.streams if not self.producers(s))

    def sinks(self) -> tuple[str, ...]:
        """Streams no computation consumes (final outputs)."""
        return tuple(s for s in self.streams if not self.consumers(s))

    def upstream_computations(self, name: str) -> list[str]:
        """Computations whose outputs ``name`` consumes."""
        spec = self.computations[name]
        return sorted({p.name for s in spec.input_streams() for p in self.producers(s)})

    def key_extractor(self, computation: str, stream: str) -> KeyExtractor:
        """How ``computation`` keys records of ``stream``."""
        for spec in self.computations[computation].inputs:
            if spec.stream == stream:
                return load_key_extractor(spec.key)
        raise KeyError(f"computation {computation!r} does not read stream {stream!r}")

    def handler_class(self, computation: str) -> type[Computation]:
        """The user class of ``computation`` (validated at load)."""
        return _import_handler(self.computations[computation].handler)


def add_module_directory(directory: Path) -> None:
    """Let ``import`` find the modules in ``directory`` (appended to ``sys.path`` once)."""
    entry = str(directory)
    if entry not in sys.path:
        sys.path.append(entry)


def _parse_computation(name: str, body: Any, problems: list[str]) -> ComputationSpec | None:
    if not isinstance(body, Mapping):
        problems.append(f"computation {name!r} must be a table")
        return None
    handler = body.get("handler")
    if not isinstance(handler, str | type):
        problems.append(f"computation {name!r} has no handler (module:Class)")
        return None
    raw_inputs = body.get("inputs", {})
    if not isinstance(raw_inputs, Mapping) or not raw_inputs:
        problems.append(f"computation {name!r} needs inputs = {{ stream = extractor, ... }}")
        return None
    productions = body.get("productions", "strong")
    if productions not in ("strong", "weak"):
        problems.append(f"computation {name!r}: productions must be 'strong' or 'weak'")
        return None
    intervals = body.get("intervals", 1)
    if not isinstance(intervals, int) or intervals < 1:
        problems.append(f"computation {name!r}: intervals must be a positive integer")
        return None
    retention = body.get("dead_letter_retention_ms", DEAD_LETTER_RETENTION_MS)
    if not isinstance(retention, int) or isinstance(retention, bool) or retention < 0:
        problems.append(
            f"computation {name!r}: dead_letter_retention_ms must be an integer >= 0 "
            "(0 keeps dead letters until deleted)"
        )
        return None
    for unknown in sorted(set(body) - COMPUTATION_SETTINGS):
        problems.append(f"computation {name!r} has unknown setting {unknown!r}")
    return ComputationSpec(
        name=name,
        handler=handler,
        inputs=tuple(InputSpec(stream=s, key=str(k)) for s, k in raw_inputs.items()),
        outputs=tuple(body.get("outputs", ())),
        intervals=intervals,
        productions=productions,
        weak_threshold_ms=int(body.get("weak_threshold_ms", 1000)),
        max_attempts=int(body.get("max_attempts", 3)),
        dead_letter_retention_ms=retention,
        params=dict(body.get("params", {})),
    )


def _import_handler(handler: str | type[Computation]) -> type[Computation]:
    if isinstance(handler, type):
        if not issubclass(handler, Computation):
            raise ValueError(f"handler {handler.__name__} is not a Computation subclass")
        return handler
    found = import_object(handler, what=f"handler {handler!r}")
    if not (isinstance(found, type) and issubclass(found, Computation)):
        raise ValueError(f"handler {handler!r} is not a Computation subclass")
    return found


def _handler_problems(spec: ComputationSpec) -> list[str]:
    try:
        handler = _import_handler(spec.handler)
    except ValueError as exc:
        return [f"computation {spec.name!r}: {exc}"]
    if not handler.handles_records():
        return [f"computation {spec.name!r}: {handler.__name__} does not implement process_record"]
    if not handler.setup_at_load:
        return []
    try:
        instance = handler()
        instance.setup(spec.params)
    except Exception as exc:  # the setting's own message, named by the computation
        return [f"computation {spec.name!r} ({handler.__name__}): {exc}"]
    problems = []
    for setting in ("output", "late_output"):
        stream = getattr(instance, setting, None)
        if isinstance(stream, str) and stream and stream not in spec.outputs:
            problems.append(
                f"computation {spec.name!r}: {setting} {stream!r} is not one of its outputs "
                f"{list(spec.outputs)}"
            )
    return problems
