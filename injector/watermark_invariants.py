"""What published watermarks must satisfy, as named predicates for tests and
consistency checks (``injector.watermark_authority`` publishes them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from millrace.computations import MIN_TIME, Topology
from millrace.engine import SOURCE_PREFIX, feeders


def _upstream_closure(topology: Topology, computation: str) -> set[str]:
    """``computation`` and the published names of everything upstream of it, transitively."""
    seen: set[str] = set()
    pending = [computation]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in topology.computations:
            pending.extend(feeders(topology, name))
    return seen


def watermark_is_monotonic(before: Mapping[str, int], after: Mapping[str, int]) -> bool:
    """Every watermark in ``before`` is still published in ``after``, at the same or later time."""
    return all(name in after and after[name] >= ms for name, ms in before.items())


def never_ahead_of_work(
    topology: Topology,
    watermarks: Mapping[str, int],
    oldest_work: Mapping[str, int | None],
    source_watermarks: Mapping[str, int],
    names: Iterable[str] | None = None,
) -> bool:
    """Each watermark in ``names`` (default: all) is at or before the work that bounds it.

    That is the oldest work of the computation and of every computation
    upstream of it, and the watermark of every source stream upstream of it.
    Check it at the moment a value is published: a value kept from earlier
    may lawfully be ahead of older work reported since (that work is late).
    """
    for name in watermarks if names is None else names:
        mark = watermarks[name]
        if name.startswith(SOURCE_PREFIX):
            bounds = {name}
        else:
            bounds = _upstream_closure(topology, name)
        for bound in bounds:
            if bound.startswith(SOURCE_PREFIX):
                limit: int | None = source_watermarks.get(bound[len(SOURCE_PREFIX) :], MIN_TIME)
            else:
                limit = oldest_work.get(bound)
            if limit is not None and mark > limit:
                return False
    return True


def downstream_never_ahead(topology: Topology, watermarks: Mapping[str, int]) -> bool:
    """No computation's watermark is ahead of the watermark of anything feeding it."""
    return all(
        watermarks[name] <= watermarks[feeder]
        for name in topology.computations
        for feeder in feeders(topology, name)
    )
