"""The ownership registry's two journal files, ``ownership.json`` and ``epochs.json``.

``ownership.json`` holds everything: the version, each interval's lease, the moves,
the nodes drained, the split layouts and the epoch floors. ``epochs.json`` holds, per
interval, the highest epoch known (a floor or its lease's) with the moves, the nodes
drained and the split layouts: so that either file alone still knows every epoch
granted and where each interval runs (``injector/ownership.py`` says why). Each is
replaced durably.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from millrace.computations import IntervalId, KeyInterval, Layout, Topology
from millrace.deployment import write_json_durably

EPOCHS_FILE = "epochs.json"
"""The second journal's name, beside ``ownership.json``."""


@dataclass(frozen=True, slots=True)
class Lease:
    """One interval's current owner."""

    computation: str
    index: int
    count: int
    epoch: int
    node_id: str
    address: str


@dataclass(frozen=True, slots=True)
class Journaled:
    """What a journal file holds (``epochs.json`` holds no leases and no version)."""

    version: int = 0
    leases: Mapping[IntervalId, Lease] = field(default_factory=dict)
    moved: Mapping[IntervalId, str] = field(default_factory=dict)
    """Interval -> the node it was moved to."""
    draining: set[str] = field(default_factory=set)
    layouts: Mapping[str, Layout] = field(default_factory=dict)
    """Per computation its intervals now (all of them in memory; only split ones
    are written)."""
    floors: Mapping[IntervalId, int] = field(default_factory=dict)
    """The epoch at or below which an interval is never granted."""


def read_ownership(path: Path, topology: Topology) -> Journaled:
    """``ownership.json`` as written by :func:`write_ownership`."""
    body = json.loads(path.read_text())
    leases = {}
    for raw in body["leases"]:
        lease = Lease(**raw)
        leases[IntervalId(lease.computation, lease.index)] = lease
    floors = {IntervalId(str(c), int(i)): int(e) for c, i, e in body.get("floors", [])}
    return Journaled(
        version=int(body["version"]), leases=leases, moved=_moves_of(body),
        draining=_draining_of(body), layouts=_layouts_of(body, topology), floors=floors,
    )  # fmt: skip


def write_ownership(path: Path, journal: Journaled) -> None:
    """Replace ``ownership.json`` durably with ``journal``."""
    body = {
        "version": journal.version,
        "leases": [_as_dict(lease) for lease in journal.leases.values()],
        "moved": _moves_as_list(journal.moved),
        "draining": sorted(journal.draining),
        "layouts": _split_layouts(journal.layouts),
        "floors": [[c, i, e] for (c, i), e in sorted(journal.floors.items())],
    }
    write_json_durably(path, body)


def read_epochs(path: Path, topology: Topology) -> Journaled:
    """``epochs.json``: the highest epoch granted per interval (as ``floors``), the
    moves, the nodes drained and the split layouts (empty when missing)."""
    if not path.exists():
        return Journaled()
    try:
        body = json.loads(path.read_text())
        granted = {IntervalId(str(c), int(i)): int(e) for c, i, e in body["granted"]}
        return Journaled(
            moved=_moves_of(body), draining=_draining_of(body),
            layouts=_layouts_of(body, topology), floors=granted,
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: malformed ({exc}); move it aside to start without it (ownership.json "
            "and the watermark journal still hold the epochs granted)"
        ) from exc


def write_epochs(path: Path, journal: Journaled) -> None:
    """Replace ``epochs.json`` durably: per interval the highest epoch known (a floor,
    or its lease's), the moves, the nodes drained and the split layouts."""
    epochs = dict(journal.floors)
    for key, lease in journal.leases.items():
        epochs[key] = max(epochs.get(key, 0), lease.epoch)
    body = {
        "granted": [[c, i, e] for (c, i), e in sorted(epochs.items())],
        "moved": _moves_as_list(journal.moved),
        "draining": sorted(journal.draining),
        "layouts": _split_layouts(journal.layouts),
    }
    write_json_durably(path, body)


def _moves_of(body: Mapping[str, object]) -> dict[IntervalId, str]:
    raw = body.get("moved", [])
    if not isinstance(raw, list):
        raise ValueError("'moved' is not a list")
    return {IntervalId(str(c), int(i)): str(n) for c, i, n in raw}


def _draining_of(body: Mapping[str, object]) -> set[str]:
    raw = body.get("draining", [])
    if not isinstance(raw, list):
        raise ValueError("'draining' is not a list")
    return {str(n) for n in raw}


def _split_layouts(layouts: Mapping[str, Layout]) -> dict[str, list[list[int]]]:
    """The layouts that are not their computation's first intervals, as journaled:
    ``[index, count]`` per interval."""
    return {
        name: [[i.index, i.count] for i in layout]
        for name, layout in sorted(layouts.items())
        if layout.uniform != layout.base_count
    }


def _layouts_of(body: Mapping[str, object], topology: Topology) -> dict[str, Layout]:
    """The split layouts a journal file holds (of computations the topology still has)."""
    raw = body.get("layouts", {})
    if not isinstance(raw, dict):
        raise ValueError("'layouts' is not a table")
    found = {}
    for name, intervals in raw.items():
        spec = topology.computations.get(name)
        if spec is not None:
            shares = (KeyInterval(name, int(i), int(n)) for i, n in intervals)
            found[name] = Layout(name, spec.intervals, shares)
    return found


def _moves_as_list(moved: Mapping[IntervalId, str]) -> list[list[object]]:
    return [[c, i, n] for (c, i), n in sorted(moved.items())]


def _as_dict(lease: Lease) -> dict[str, object]:
    return {
        "computation": lease.computation,
        "index": lease.index,
        "count": lease.count,
        "epoch": lease.epoch,
        "node_id": lease.node_id,
        "address": lease.address,
    }
