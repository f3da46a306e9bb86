"""Plain operators against plain-Python oracles, from Python and from a topology file,
with crashes between steps and duplicate deliveries (the harness's own)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import Record, Topology
from millrace.computations.testing import TestHarness
from millrace.dataflow import Dedup, Filter, FlatMap, Map, Split, Union


# The functions a topology file names ("tests.dataflow.test_operators:...").
def doubled(record: Record) -> Any:
    return json.loads(record.value) * 2


def even(record: Record) -> bool:
    return bool(json.loads(record.value) % 2 == 0)


def digits(record: Record) -> Iterable[Any]:
    return [int(d) for d in str(json.loads(record.value))]


def big(record: Record) -> bool:
    return bool(json.loads(record.value) >= 50)


def small(record: Record) -> bool:
    return bool(json.loads(record.value) < 10)


class Rekeyed(Map):
    """A subclass: key by parity, value as text."""

    output = "out"

    def map(self, record: Record) -> Any:
        number = json.loads(record.value)
        return Record("in", b"odd" if number % 2 else b"even", str(number).encode(), 7)


def harness(handler: object, params: dict[str, Any], outputs: list[str], **kw: Any) -> TestHarness:
    return TestHarness(
        Topology.from_dict(
            {
                "streams": {"in": {}, "other": {}, **{s: {} for s in outputs}},
                "computations": {
                    "op": {
                        "handler": handler,
                        "intervals": 2,
                        "inputs": {"in": "key", **kw.get("inputs", {})},
                        "outputs": outputs,
                        "params": params,
                    }
                },
            }
        )
    )


numbers = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 120)), max_size=40)


def fed(h: TestHarness, events: list[tuple[int, int]], stream: str = "in") -> None:
    for n, (key, value) in enumerate(events):
        h.feed(stream, f"k{key}".encode(), str(value).encode(), 1_000 + n)
    h.run()


def values(h: TestHarness, stream: str) -> list[tuple[bytes, Any]]:
    return sorted((r.key, json.loads(r.value)) for r in h.outputs(stream))


@settings(max_examples=30, deadline=None)
@given(events=numbers)
def test_map_filter_and_flat_map_from_a_topology(events: list[tuple[int, int]]) -> None:
    name = "tests.dataflow.test_operators"
    cases: list[tuple[str, dict[str, str], Callable[[int], list[int]]]] = [
        ("millrace.dataflow:Map", {"fn": f"{name}:doubled"}, lambda v: [v * 2]),
        ("millrace.dataflow:Filter", {"fn": f"{name}:even"}, lambda v: [v] if v % 2 == 0 else []),
        ("millrace.dataflow:FlatMap", {"fn": f"{name}:digits"}, lambda v: [int(d) for d in str(v)]),
    ]
    for handler, params, oracle in cases:
        h = harness(handler, {**params, "output": "out"}, ["out"])
        fed(h, events)
        expected = sorted((f"k{k}".encode(), out) for k, v in events for out in oracle(v))
        assert values(h, "out") == expected, handler


def test_a_map_may_rekey_and_retime() -> None:
    h = harness(Rekeyed, {}, ["out"])
    fed(h, [(0, 3), (1, 4)])
    assert sorted((r.key, r.value, r.event_time_ms) for r in h.outputs("out")) == [
        (b"even", b"4", 7), (b"odd", b"3", 7),
    ]  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(events=numbers)
def test_split_sends_each_record_to_its_first_route(events: list[tuple[int, int]]) -> None:
    name = "tests.dataflow.test_operators"
    routes = {"big": f"{name}:big", "small": f"{name}:small"}
    h = harness(
        "millrace.dataflow:Split", {"routes": routes, "default": "rest"}, ["big", "small", "rest"]
    )
    fed(h, events)
    routed: list[tuple[str, Callable[[int], bool]]] = [
        ("big", lambda v: v >= 50), ("small", lambda v: v < 10),
        ("rest", lambda v: 10 <= v < 50),
    ]  # fmt: skip
    for stream, holds in routed:
        expected = sorted((f"k{k}".encode(), v) for k, v in events if holds(v))
        assert values(h, stream) == expected, stream


def test_union_passes_every_input() -> None:
    h = harness("millrace.dataflow:Union", {"output": "out"}, ["out"], inputs={"other": "key"})
    fed(h, [(0, 1), (1, 2)])
    fed(h, [(2, 3)], stream="other")
    assert values(h, "out") == [(b"k0", 1), (b"k1", 2), (b"k2", 3)]


@settings(max_examples=40, deadline=None)
@given(
    events=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), max_size=40),
    crashes=st.sets(st.integers(0, 39)),
)
def test_dedup_passes_a_keys_first_record_per_time_bound(
    events: list[tuple[int, int]], crashes: set[int]
) -> None:
    """Records in event-time order, the watermark following them, the interval crashing
    (its uncommitted work lost, deliveries retried) after the steps drawn: the oracle
    keeps a key's record unless one it kept is less than ``within_ms`` before it."""
    within = 5_000
    h = harness("millrace.dataflow:Dedup", {"output": "out", "within_ms": within}, ["out"])
    times = sorted(t * 1_000 for _, t in events)
    kept: dict[str, int] = {}
    expected: list[tuple[bytes, int]] = []
    for (key, _), t in zip(events, times, strict=True):
        name = f"k{key}"
        h.feed("in", name.encode(), str(t).encode(), t)
        if len(expected) in crashes:
            h.step()
            h.crash()
        h.run()
        h.advance_watermark(t)
        h.run()
        if name not in kept or t - kept[name] >= within:
            kept[name] = t
            expected.append((name.encode(), t))
    assert values(h, "out") == sorted(expected)


@pytest.mark.parametrize(
    ("handler", "params", "message"),
    [
        (Map, {"output": "out"}, "needs its function: override map()"),
        ("millrace.dataflow:Map", {"fn": "nowhere:nothing", "output": "out"}, "cannot be imported"),
        (
            "millrace.dataflow:Filter",
            {"fn": "tests.dataflow.test_operators:even"},
            "needs an output",
        ),
        ("millrace.dataflow:Dedup", {"output": "out", "within": 5}, "has no setting 'within'"),
        (
            "millrace.dataflow:Dedup",
            {"output": "out", "within_ms": "soon"},
            "within_ms .soon.: expected",
        ),
        ("millrace.dataflow:Split", {"default": "out"}, "Split needs routes"),
    ],
)
def test_a_misconfigured_operator_says_what_is_wrong(
    handler: object, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        instance = harness(handler, params, ["out"]).topology.handler_class("op")()
        instance.setup(params)


def test_the_classes_are_what_the_topology_names() -> None:
    assert all(cls.__module__ == "millrace.dataflow._operators"
               for cls in (Map, Filter, FlatMap, Split, Union, Dedup))  # fmt: skip
