"""The watermark authority under random reports and source moves, against an oracle; the
invariant predicates themselves."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_TIME, MIN_TIME, IntervalId
from millrace.injector.watermark_authority import IntervalReport, WatermarkAuthority
from millrace.injector.watermark_invariants import (
    downstream_never_ahead,
    never_ahead_of_work,
    watermark_is_monotonic,
)
from tests.workloads import two_stage_topology

# -- property: random reports and source moves ---------------------------------


@dataclass(frozen=True)
class Report:
    computation: str
    index: int
    epoch: int
    work: int | None


@dataclass(frozen=True)
class SourceMove:
    ms: int


STEP = st.one_of(
    st.builds(
        Report,
        st.sampled_from(["counts", "totals"]),
        st.integers(0, 1),
        st.integers(0, 4),
        st.one_of(st.none(), st.integers(0, 1_000)),
    ),
    st.builds(SourceMove, st.integers(0, 1_200)),
)


class Oracle:
    """The authority's inputs, tracked independently of it: latest accepted report per interval."""

    def __init__(self) -> None:
        self.latest: dict[IntervalId, tuple[int, int | None]] = {}
        self.source = MIN_TIME

    def report(self, step: Report) -> bool:
        held = self.latest.get(IntervalId(step.computation, step.index))
        if held is not None and step.epoch < held[0]:
            return False
        self.latest[IntervalId(step.computation, step.index)] = (step.epoch, step.work)
        return True

    def oldest_work(self) -> dict[str, int | None]:
        result: dict[str, int | None] = {}
        for name in ("counts", "totals"):
            # An interval that never reported holds its computation at MIN_TIME.
            works = [self.latest.get(IntervalId(name, i), (0, MIN_TIME))[1] for i in range(2)]
            result[name] = min((w for w in works if w is not None), default=None)
        return result


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(STEP, max_size=40))
def test_random_inputs_keep_the_invariants(steps: list[Report | SourceMove]) -> None:
    topology = two_stage_topology()
    auth = WatermarkAuthority(topology, clock=lambda: 0)
    oracle = Oracle()
    before = auth.watermarks()
    for step in steps:
        if isinstance(step, Report):
            expected = oracle.report(step)
            accepted, ignored = auth.report(
                [IntervalReport(step.computation, step.index, step.epoch, step.work)]
            )
            assert (accepted, ignored) == (
                (1, []) if expected else (0, [(step.computation, step.index)])
            )
        else:
            oracle.source = max(oracle.source, step.ms)
            auth.set_source_watermark("events", step.ms)
        after = auth.watermarks()
        changed = [name for name in after if after[name] != before[name]]

        assert watermark_is_monotonic(before, after)
        # A value is checked when it is published; one kept from earlier may be
        # ahead of older work reported since (that work is late).
        assert never_ahead_of_work(
            topology, after, oracle.oldest_work(), {"events": oracle.source}, changed
        )
        assert downstream_never_ahead(topology, after)
        assert auth.input_watermark("totals") == after["counts"]
        before = after

    # Everything done and the source finished: the watermarks reach the end.
    auth.report([IntervalReport(c, i, 99, None) for c in ("counts", "totals") for i in range(2)])
    auth.set_source_watermark("events", MAX_TIME)
    assert set(auth.watermarks().values()) == {MAX_TIME}


def test_the_predicates_catch_violations() -> None:
    topology = two_stage_topology()
    assert not watermark_is_monotonic({"counts": 5}, {"counts": 4})
    assert not watermark_is_monotonic({"counts": 5}, {})
    work = {"counts": 100, "totals": None}
    source = {"events": 1_000}
    # totals is bounded by counts' work, upstream of it.
    assert not never_ahead_of_work(topology, {"totals": 101}, work, source)
    assert never_ahead_of_work(topology, {"totals": 100}, work, source)
    assert not never_ahead_of_work(topology, {"counts": 50}, work, {"events": 10})
    assert not downstream_never_ahead(topology, {"source:events": 10, "counts": 10, "totals": 11})
