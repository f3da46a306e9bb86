"""The built-in aggregations by name, for topology ``params`` (``aggregate = "sum"``)."""

from __future__ import annotations

from dataflow._combiners import Combiner, Count, Max, Mean, Min, Sum
from dataflow._sketches import ApproxDistinct, ApproxQuantiles, Distinct, TopK

COMBINERS: dict[str, type[Combiner]] = {
    "count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean, "distinct": Distinct,
    "approx_distinct": ApproxDistinct, "quantiles": ApproxQuantiles, "top_k": TopK,
}  # fmt: skip


def parse_aggregate(spec: str) -> Combiner:
    """A built-in combiner by name, with its default settings."""
    if spec not in COMBINERS:
        raise ValueError(f"aggregate {spec!r}: expected one of {sorted(COMBINERS)}")
    return COMBINERS[spec]()
