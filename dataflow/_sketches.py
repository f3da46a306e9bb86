"""Aggregations over distinct values and distributions: exact, and Apache DataSketches.

The approximate ones keep a sketch per window (HLL for distinct counts, KLL
for quantiles, frequent items for the top k), serialized into the window's
JSON state as base64: mergeable (session merges) and a few kilobytes however
many records the window holds.
"""

from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Sequence
from typing import Any

import datasketches

from millrace.dataflow._combiners import Combiner


def _token(value: Any) -> str:
    """A value as sketches see it (``"a"`` and ``1`` stay apart)."""
    return json.dumps(value, separators=(",", ":"))


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _decode(text: str) -> bytes:
    return base64.b64decode(text)


class Distinct(Combiner):
    """The exact number of distinct values (the accumulator is the sorted set of them:
    use ``ApproxDistinct`` where there are many)."""

    numeric = False
    plain_accumulator = True

    def create(self) -> list[str]:
        return []

    def add(self, accumulator: list[str], value: Any) -> list[str]:
        token = _token(value)
        at = bisect.bisect_left(accumulator, token)
        if at == len(accumulator) or accumulator[at] != token:
            accumulator.insert(at, token)
        return accumulator

    def merge(self, left: list[str], right: list[str]) -> list[str]:
        return sorted(set(left) | set(right))

    def result(self, accumulator: list[str]) -> int:
        return len(accumulator)


class ApproxDistinct(Combiner):
    """An HLL estimate of the number of distinct values (``lg_k`` 4..21: 2**lg_k
    buckets; the relative error is about 1.04 / sqrt(2**lg_k), 1.6% at 12)."""

    numeric = False
    plain_accumulator = True

    def __init__(self, lg_k: int = 12) -> None:
        self.lg_k = lg_k

    def create(self) -> str:
        return _encode(datasketches.hll_sketch(self.lg_k).serialize_compact())

    def add(self, accumulator: str, value: Any) -> str:
        sketch = datasketches.hll_sketch.deserialize(_decode(accumulator))
        sketch.update(_token(value))
        return _encode(sketch.serialize_compact())

    def merge(self, left: str, right: str) -> str:
        union = datasketches.hll_union(self.lg_k)
        union.update(datasketches.hll_sketch.deserialize(_decode(left)))
        union.update(datasketches.hll_sketch.deserialize(_decode(right)))
        return _encode(union.get_result().serialize_compact())

    def result(self, accumulator: str) -> int:
        estimate: float = datasketches.hll_sketch.deserialize(_decode(accumulator)).get_estimate()
        return round(estimate)


class ApproxQuantiles(Combiner):
    """KLL estimates of the values' quantiles: the result maps each of ``quantiles``
    (as text) to its value, None for an empty window. ``k`` trades size for accuracy
    (200: about 1.3% rank error)."""

    plain_accumulator = True

    def __init__(self, quantiles: Sequence[float] = (0.5, 0.9, 0.99), k: int = 200) -> None:
        self.quantiles = tuple(quantiles)
        self.k = k

    def create(self) -> str:
        return _encode(datasketches.kll_doubles_sketch(self.k).serialize())

    def add(self, accumulator: str, value: float) -> str:
        sketch = datasketches.kll_doubles_sketch.deserialize(_decode(accumulator))
        sketch.update(float(value))
        return _encode(sketch.serialize())

    def merge(self, left: str, right: str) -> str:
        sketch = datasketches.kll_doubles_sketch.deserialize(_decode(left))
        sketch.merge(datasketches.kll_doubles_sketch.deserialize(_decode(right)))
        return _encode(sketch.serialize())

    def result(self, accumulator: str) -> dict[str, float] | None:
        sketch = datasketches.kll_doubles_sketch.deserialize(_decode(accumulator))
        if sketch.is_empty():
            return None
        return {str(q): float(sketch.get_quantile(q)) for q in self.quantiles}


class TopK(Combiner):
    """The ``k`` most frequent values with their estimated counts (frequent-items
    sketch with 2**``lg_max_map`` counters; counts are exact below that many distinct
    values)."""

    numeric = False
    plain_accumulator = True

    def __init__(self, k: int = 10, lg_max_map: int = 8) -> None:
        self.k = k
        self.lg_max_map = lg_max_map

    def create(self) -> str:
        return _encode(datasketches.frequent_strings_sketch(self.lg_max_map).serialize())

    def add(self, accumulator: str, value: Any) -> str:
        sketch = datasketches.frequent_strings_sketch.deserialize(_decode(accumulator))
        sketch.update(_token(value), 1)
        return _encode(sketch.serialize())

    def merge(self, left: str, right: str) -> str:
        sketch = datasketches.frequent_strings_sketch.deserialize(_decode(left))
        sketch.merge(datasketches.frequent_strings_sketch.deserialize(_decode(right)))
        return _encode(sketch.serialize())

    def result(self, accumulator: str) -> list[list[Any]]:
        sketch = datasketches.frequent_strings_sketch.deserialize(_decode(accumulator))
        items = sketch.get_frequent_items(datasketches.frequent_items_error_type.NO_FALSE_POSITIVES)
        ranked = sorted(items, key=lambda item: (-item[1], item[0]))[: self.k]
        return [[json.loads(item), estimate] for item, estimate, *_ in ranked]
