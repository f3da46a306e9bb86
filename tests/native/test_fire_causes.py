"""The causes that name a timer fire's productions, made natively, against the layout
``engine/_production_ids.py`` documents (the reference below is built with
``struct``): a production id of a timer fire must not change between versions, or a
restarted node would emit its panes again under new ids."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millrace.dataplane import timer_fire_causes
from millrace.engine._production_ids import timer_fire_cause
from millrace.statestore import Timer
from millrace.statestore.types import TimeDomain


def reference(computation: str, timer: Timer) -> bytes:
    tag = timer.tag.encode()
    return (
        b"f" + computation.encode() + b"\x00" + bytes((timer.domain,))
        + struct.pack(">I", len(timer.key)) + timer.key + struct.pack(">I", len(tag)) + tag
        + struct.pack(">q", timer.time_ms) + timer.cause
    )  # fmt: skip


timers = st.builds(
    Timer,
    domain=st.sampled_from(TimeDomain),
    key=st.binary(max_size=30),
    tag=st.text(max_size=20),
    time_ms=st.integers(-(2**63), 2**63 - 1),
    cause=st.binary(max_size=20),
)


@given(st.text(max_size=12), st.lists(timers, max_size=20))
def test_a_round_of_fire_causes_is_the_documented_layout(
    computation: str, round_: list[Timer]
) -> None:
    expected = [reference(computation, t) for t in round_]
    assert timer_fire_causes(computation, round_) == expected
    assert [timer_fire_cause(computation, t) for t in round_] == expected


def test_a_timer_that_is_not_one_is_refused() -> None:
    with pytest.raises(TypeError):
        timer_fire_causes("c", [(1, "key", "tag", 5, b"")])  # type: ignore[list-item]
    with pytest.raises(OverflowError):
        timer_fire_causes("c", [Timer(TimeDomain.EVENT_TIME, b"k", "t", 2**63)])
