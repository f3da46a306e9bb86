"""The built-in aggregations by name, for topology ``params`` (``aggregate = "sum"``)."""

from __future__ import annotations

from millrace.dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from millrace.dataflow._json_combiners import Collect, MaxBy, MinBy, TopN
from millrace.dataflow._sketches import ApproxDistinct, ApproxQuantiles, Distinct, TopK

COMBINERS: dict[str, type[Combiner]] = {
    "count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean, "distinct": Distinct,
    "approx_distinct": ApproxDistinct, "quantiles": ApproxQuantiles, "top_k": TopK,
}  # fmt: skip


WITH_ARGUMENTS = ("max_by:FIELD", "min_by:FIELD", "top_n:N:FIELD", "collect")
"""The aggregates of any JSON value and how topology params name them."""


def parse_aggregate(spec: str) -> Combiner:
    """A built-in combiner by name, with its default settings; several joined by ``+``
    (``count+sum``) make a :class:`Combined` one. The aggregates of any JSON value take
    their settings in the name: ``max_by:price``, ``min_by:price``, ``top_n:3:count``
    (ties included), ``collect``."""
    parts = spec.split("+")
    combiners = {part.split(":")[0]: _one(spec, part) for part in parts}
    if len(combiners) != len(parts):
        raise ValueError(f"aggregate {spec!r} names one aggregate twice")
    if len(parts) == 1:
        return next(iter(combiners.values()))
    return Combined(combiners)


def _one(spec: str, part: str) -> Combiner:
    name, *args = part.split(":")
    if name in COMBINERS and not args:
        return COMBINERS[name]()
    if name in ("max_by", "min_by") and len(args) == 1 and args[0]:
        return MaxBy(args[0]) if name == "max_by" else MinBy(args[0])
    if name == "top_n" and len(args) == 2 and args[0].isdigit() and args[1]:
        return TopN(int(args[0]), args[1])
    if name == "collect" and not args:
        return Collect()
    raise ValueError(
        f"aggregate {spec!r}: expected one of {sorted(COMBINERS)} or "
        f"{', '.join(WITH_ARGUMENTS)}, or several joined by + (count+sum)"
    )
