"""The randomized delivery test's topology, its parties and how often each fault happens."""

from __future__ import annotations

from millrace.statestore import StoreConfig
from tests.workloads import two_stage_topology

TOPOLOGY = two_stage_topology((1, 1))
SOURCE_STREAM = "events"
SINK_STREAM = "window_totals"
STAGES = ("counts", "totals")
SOURCE = "source"
"""Sender name of the injector (owns no interval, epoch 0)."""
SINK = "sink"
"""Destination name of the sink stream."""
STORE_CONFIG = StoreConfig(sync=False)
"""Crashes here close the store (a process crash): no fsync needed for durability."""


# Weights of the chaos actions (an action with nothing to act on is skipped).
WEIGHTS = {
    "feed": 3.0,
    "deliver": 12.0,
    "lose": 1.0,
    "resend": 1.5,
    "replay": 0.7,
    "crash": 0.3,
    "watermark": 2.0,
}
DUPLICATE_P = 0.15  # a delivered batch stays in flight to be delivered again
PARTIAL_P = 0.15  # only part of a batch gets through
GROUP_P = 0.3  # more batches for the same receiver join the commit
ACK_LOSS_P = 0.15

Event = tuple[bytes, bytes, int]  # record id, key, event time
