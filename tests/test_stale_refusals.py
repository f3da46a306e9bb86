"""A receiver refusing an interval as stale for long while the registry still leases it
here is said loudly, once a minute; a passing refusal is not."""

from __future__ import annotations

from itertools import pairwise

from millrace.computations import IntervalId
from millrace.node._stale_refusals import PERSIST_S, QUIET_S, REPEAT_S, StaleRefusals

AT = IntervalId("counts", 0)


def test_a_passing_refusal_is_not_a_conflict() -> None:
    refusals = StaleRefusals()
    assert refusals.note(AT, 3, "stale", 100.0) is None
    assert refusals.note(AT, 3, "stale", 100.0 + PERSIST_S / 2) is None


def test_refusals_that_go_on_are_said_once_a_minute() -> None:
    refusals = StaleRefusals()
    said = [
        t for t in range(0, 200) if refusals.note(AT, 3, "epoch 3 is stale", float(t)) is not None
    ]
    assert said[0] == PERSIST_S and all(b - a == REPEAT_S for a, b in pairwise(said))
    message = refusals.note(AT, 3, "epoch 3 is stale", 1000.0 + QUIET_S + 1)
    assert message is None, "a pause starts a new spell"


def test_the_message_names_the_interval_the_epoch_and_the_refusal() -> None:
    refusals = StaleRefusals()
    refusals.note(AT, 3, "x", 0.0)
    message = refusals.note(AT, 3, "epoch 3 is stale: a newer owner has delivered here", 10.0)
    assert message is not None
    assert "counts/0 epoch 3" in message and "a newer owner has delivered here" in message
