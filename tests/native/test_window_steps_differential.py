"""The native steps of ``WindowedAggregation``'s batch path against the Python code
they stand in for, byte for byte, on random states.

- ``fold_window_states`` folds a group's count, sum, min and max into a stored window
  state: equal to the combiner's ``add`` over the group's values, the state encoded
  by ``PLAIN_STATE`` (msgspec).
- ``on_time_panes`` writes a window's on-time pane from its state: equal to
  ``Pane.encode`` of the combiner's ``result`` (Python's float ``repr`` for a mean,
  ``json``'s ASCII escapes for keys and names).

- ``window_tags`` names windows' states and timers: equal to ``Window.tag``.

A state the native code cannot match exactly must come back as "fold it in Python",
never as different bytes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millrace.computations import MAX_EVENT_TIME_MS
from millrace.dataflow._combiners import Combined, Combiner, Count, Max, Mean, Min, Sum
from millrace.dataflow._panes import Pane, Timing
from millrace.dataflow._state_serde import PLAIN_STATE
from millrace.dataflow._windows import Window
from millrace.dataplane import fold_window_states, on_time_panes, window_tags

PARTS: dict[str, type[Combiner]] = {
    "count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean,
}  # fmt: skip
INT64 = st.integers(-(2**63), 2**63 - 1)
NUMBER = st.one_of(st.integers(-(2**60), 2**60), st.integers(), st.floats(allow_nan=False))


@st.composite
def aggregates(draw: st.DrawFn) -> tuple[list[str], bool, Combiner]:
    names = draw(st.lists(st.sampled_from(sorted(PARTS)), min_size=1, max_size=3, unique=True))
    if len(names) == 1 and draw(st.booleans()):
        return names, False, PARTS[names[0]]()
    return names, True, Combined({n: PARTS[n]() for n in names})


def accumulator(draw: st.DrawFn, part: str) -> Any:
    if part == "mean":
        return [draw(NUMBER), draw(st.integers(0, 2**60))]
    if part in ("min", "max"):
        return draw(st.one_of(st.none(), NUMBER))
    return draw(NUMBER)


@st.composite
def states(draw: st.DrawFn, names: list[str], combined: bool) -> dict[str, Any]:
    accs = [accumulator(draw, n) for n in names]
    state: dict[str, Any] = {
        "acc": accs if combined else accs[0],
        "fired": draw(st.booleans()),
        "pane": draw(st.integers(0, 5)),
        "since": draw(st.integers(0, 1000)),
    }
    if draw(st.booleans()):
        state["early_at"] = draw(INT64)
    if draw(st.booleans()):
        state["last_timing"] = draw(st.sampled_from(["early", "on_time", "é"]))
    return state


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_folded_state_is_what_add_makes(data: st.DataObject) -> None:
    names, combined, combiner = data.draw(aggregates())
    stored = data.draw(st.one_of(st.none(), states(names, combined)))
    values = data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6))
    raw = None if stored is None else PLAIN_STATE.dumps(stored)
    written, out, opened, left, python = fold_window_states(
        [raw], [len(values)], [0], ([sum(values)], [min(values)], [max(values)]),
        parts=names, combined=combined, early_count=None, size_ms=10, end_ms=0,
        passed_ms=-1, max_ms=MAX_EVENT_TIME_MS,
    )  # fmt: skip
    if python:
        return  # folded in Python: nothing to compare
    if stored is not None and stored["fired"]:
        assert left == [0]
        return
    assert written == [0]
    assert opened == ([0] if stored is None else [])
    state = stored or {"acc": combiner.create(), "pane": 0, "since": 0, "fired": False}
    acc = state["acc"]
    for value in values:
        acc = combiner.add(acc, value)
    expected = dict(state, acc=acc, since=state["since"] + len(values))
    assert out == [PLAIN_STATE.dumps(expected)]


@settings(max_examples=400, deadline=None)
@given(
    st.data(),
    st.one_of(st.binary(max_size=8), st.text(max_size=8).map(str.encode)),
    st.integers(-(2**45), 2**45),
)
def test_an_on_time_pane_is_what_pane_encode_writes(
    data: st.DataObject, key: bytes, start: int
) -> None:
    names, combined, combiner = data.draw(aggregates())
    if isinstance(combiner, Combined) and data.draw(st.booleans()):  # names a user may write
        renamed = data.draw(
            st.lists(st.text(max_size=6), min_size=len(names), max_size=len(names), unique=True)
        )
        combiner = Combined(dict(zip(renamed, combiner.parts.values(), strict=True)))
    stored = data.draw(states(names, combined))
    window = Window(start, start + data.draw(st.integers(1, 10**6)))
    raw = PLAIN_STATE.dumps(stored)
    labels = list(combiner.parts) if isinstance(combiner, Combined) else []
    after = data.draw(st.sampled_from(["forget", "accumulate", "discard"]))
    fired, panes, times, kept, left, python = on_time_panes(
        [raw], [key], [window.tag()], parts=names, names=labels, combined=combined,
        max_ms=MAX_EVENT_TIME_MS, after=after,
    )  # fmt: skip
    if python:
        return
    if "early_at" in stored:
        assert left == [0]
        return
    result = combiner.result(stored["acc"])
    expected = Pane(key, window, stored["pane"], Timing.ON_TIME, result).encode()
    assert (fired, panes, times) == ([0], [expected], [window.last_ms])
    if after == "forget":
        assert kept == []
        return
    # The state process_timer keeps for late records: _emit, then fired.
    state = dict(stored, pane=stored["pane"] + 1, since=0, fired=True)
    if after == "discard":
        state["acc"] = combiner.create()
    assert kept == [PLAIN_STATE.dumps(state)]


def test_what_the_native_panes_cover_goes_native() -> None:
    """The usual states do not fall back to Python (the comparison above would pass
    vacuously if everything did)."""
    state = PLAIN_STATE.dumps({"acc": [3, 7, [10, 4]], "fired": False, "pane": 0, "since": 3})
    fired, panes, _, _, _, python = on_time_panes(
        [state, None], [b"k\xc3\xa9", b"x"], ["0/10", "0/10"], parts=["count", "sum", "mean"],
        names=["n", "s", "m"], combined=True, max_ms=MAX_EVENT_TIME_MS,
    )  # fmt: skip
    assert (fired, python) == ([0], [])
    assert panes[0].endswith(b'"value":{"n":3,"s":7,"m":2.5}}')
    written, _, _, _, python = fold_window_states(
        [state, None], [2, 1], [0, 0], ([5, 1], [1, 1], [4, 1]), parts=["count", "sum", "mean"],
        combined=True, early_count=None, size_ms=10, end_ms=0, passed_ms=-1, max_ms=10**9,
    )  # fmt: skip
    assert (written, python) == ([0, 1], [])


@given(
    starts=st.lists(INT64, max_size=20),
    size_ms=st.one_of(st.just(0), st.integers(1, 2**62)),
    end_ms=INT64,
    prefix=st.sampled_from(["w:", "on:", ""]),
)
def test_window_tags_are_window_tag(
    starts: list[int], size_ms: int, end_ms: int, prefix: str
) -> None:
    expected = [
        prefix + Window(start, start + size_ms if size_ms else end_ms).tag() for start in starts
    ]
    assert window_tags(starts, size_ms=size_ms, end_ms=end_ms, prefix=prefix) == expected
