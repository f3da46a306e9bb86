"""Aggregations as combiners: an accumulator per window, never the raw events.

A combiner's accumulator is a JSON value (it is stored as window state):
``create`` makes an empty one, ``add`` folds in one input value, ``merge``
combines two (for merging windows), ``result`` is what a pane emits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any


class Combiner(ABC):
    """``create / add / merge / result`` over JSON accumulators."""

    needs_value = True
    """False when the combiner ignores the records' values (``Count``)."""
    numeric = True
    """True when values must be finite numbers; False: any JSON string or number."""
    json_values = False
    """True when values may be any JSON value (objects and lists too): the value (or its
    ``field``, or a pane's value) is passed as parsed (``dataflow/_json_combiners.py``)."""
    plain_accumulator = False
    """True when every accumulator is made of dicts with str keys, lists, str, int,
    float, bool and None only (the built-in combiners): window state is then
    encoded by msgspec, which would turn anything else (bytes, sets, tuples,
    dataclasses) into JSON silently instead of refusing it."""

    @abstractmethod
    def create(self) -> Any:
        """An empty accumulator."""

    @abstractmethod
    def add(self, accumulator: Any, value: float) -> Any:
        """``accumulator`` with ``value`` folded in."""

    def add_all(self, accumulator: Any, values: list[Any]) -> Any:
        """``accumulator`` with every one of ``values`` folded in, as :meth:`add` one
        by one would (a batch's group of values; a combiner may do it in fewer steps)."""
        for value in values:
            accumulator = self.add(accumulator, value)
        return accumulator

    @abstractmethod
    def merge(self, left: Any, right: Any) -> Any:
        """One accumulator holding both."""

    def result(self, accumulator: Any) -> Any:
        """What a pane emits (default: the accumulator itself)."""
        return accumulator

    def checked(self, value: Any) -> Any:
        """``value`` if :meth:`add` can take it (``ValueError`` otherwise), checked as it
        is read, before anything is folded: a JSON-valued combiner's hook (default: as
        it is)."""
        return value

    retractable = False
    """True when :meth:`retract` is implemented (needed to consume a retracting stream)."""

    def retract(self, accumulator: Any, value: float) -> Any:
        """``accumulator`` without ``value`` (which :meth:`add` folded in before)."""
        raise NotImplementedError(f"{type(self).__name__} cannot retract")


class Count(Combiner):
    """How many records."""

    plain_accumulator = True
    needs_value = False
    retractable = True

    def create(self) -> int:
        return 0

    def add(self, accumulator: int, value: float) -> int:
        return accumulator + 1

    def retract(self, accumulator: int, value: float) -> int:
        return accumulator - 1

    def merge(self, left: int, right: int) -> int:
        return left + right


class Sum(Combiner):
    """The sum of the values."""

    plain_accumulator = True
    retractable = True

    def create(self) -> float:
        return 0

    def add(self, accumulator: float, value: float) -> float:
        return accumulator + value

    def retract(self, accumulator: float, value: float) -> float:
        return accumulator - value

    def merge(self, left: float, right: float) -> float:
        return left + right


class Min(Combiner):
    """The smallest value (None for an empty window)."""

    plain_accumulator = True

    def create(self) -> float | None:
        return None

    def add(self, accumulator: float | None, value: float) -> float:
        return value if accumulator is None else min(accumulator, value)

    def merge(self, left: float | None, right: float | None) -> float | None:
        return right if left is None else left if right is None else min(left, right)


class Max(Combiner):
    """The largest value (None for an empty window)."""

    plain_accumulator = True

    def create(self) -> float | None:
        return None

    def add(self, accumulator: float | None, value: float) -> float:
        return value if accumulator is None else max(accumulator, value)

    def merge(self, left: float | None, right: float | None) -> float | None:
        return right if left is None else left if right is None else max(left, right)


class Mean(Combiner):
    """The mean of the values (None for an empty window); accumulates ``[sum, count]``."""

    plain_accumulator = True

    def create(self) -> list[float]:
        return [0, 0]

    retractable = True

    def add(self, accumulator: list[float], value: float) -> list[float]:
        return [accumulator[0] + value, accumulator[1] + 1]

    def retract(self, accumulator: list[float], value: float) -> list[float]:
        return [accumulator[0] - value, accumulator[1] - 1]

    def merge(self, left: list[float], right: list[float]) -> list[float]:
        return [left[0] + right[0], left[1] + right[1]]

    def result(self, accumulator: list[float]) -> float | None:
        return accumulator[0] / accumulator[1] if accumulator[1] else None


class Combined(Combiner):
    """Several aggregates of the same values at once, as one JSON object: e.g.
    ``Combined({"count": Count(), "sum": Sum()})`` emits ``{"count": 3, "sum": 12}``
    (``aggregate = "count+sum"`` in topology params). Its accumulator is the list of
    the parts' accumulators."""

    def __init__(self, parts: Mapping[str, Combiner]) -> None:
        if not parts:
            raise ValueError("Combined needs at least one aggregate")
        self.parts = dict(parts)
        combiners = self.parts.values()
        self.needs_value = any(c.needs_value for c in combiners)
        self.numeric = all(c.numeric for c in combiners)
        self.json_values = any(c.json_values for c in combiners)
        if self.json_values and not all(c.json_values or not c.needs_value for c in combiners):
            raise ValueError(
                "Combined cannot mix aggregates of any JSON value (max_by, top_n, collect) "
                "with aggregates of numbers or strings"
            )
        self.retractable = all(c.retractable for c in combiners)
        self.plain_accumulator = all(c.plain_accumulator for c in combiners)

    def checked(self, value: Any) -> Any:
        for part in self.parts.values():
            part.checked(value)
        return value

    def create(self) -> list[Any]:
        return [c.create() for c in self.parts.values()]

    def add(self, accumulator: list[Any], value: float) -> list[Any]:
        return [c.add(a, value) for c, a in zip(self.parts.values(), accumulator, strict=True)]

    def retract(self, accumulator: list[Any], value: float) -> list[Any]:
        return [c.retract(a, value) for c, a in zip(self.parts.values(), accumulator, strict=True)]

    def merge(self, left: list[Any], right: list[Any]) -> list[Any]:
        return [c.merge(a, b) for c, a, b in zip(self.parts.values(), left, right, strict=True)]

    def result(self, accumulator: list[Any]) -> dict[str, Any]:
        return {
            name: c.result(a) for (name, c), a in zip(self.parts.items(), accumulator, strict=True)
        }
