"""The built-in aggregations by name, for topology ``params`` (``aggregate = "sum"``)."""

from __future__ import annotations

from dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from dataflow._sketches import ApproxDistinct, ApproxQuantiles, Distinct, TopK

COMBINERS: dict[str, type[Combiner]] = {
    "count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean, "distinct": Distinct,
    "approx_distinct": ApproxDistinct, "quantiles": ApproxQuantiles, "top_k": TopK,
}  # fmt: skip


def parse_aggregate(spec: str) -> Combiner:
    """A built-in combiner by name, with its default settings; several joined by ``+``
    (``count+sum``) make a :class:`Combined` one."""
    names = spec.split("+")
    for name in names:
        if name not in COMBINERS:
            raise ValueError(
                f"aggregate {spec!r}: expected one of {sorted(COMBINERS)}, or several "
                "joined by + (count+sum)"
            )
    if len(names) == 1:
        return COMBINERS[spec]()
    if len(set(names)) != len(names):
        raise ValueError(f"aggregate {spec!r} names one aggregate twice")
    return Combined({name: COMBINERS[name]() for name in names})
