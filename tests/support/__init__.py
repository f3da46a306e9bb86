"""What the tests and benchmarks share: real processes and pipeline ends
(:mod:`tests.support.cluster`), waiting for a condition, a manual clock.

Import from here, not from another test module.
"""

from tests.support.chaos import RandomKills
from tests.support.clock import ManualClock, faketime_library
from tests.support.cluster import (
    ROOT,
    CollectingSink,
    DeliveryEndpoint,
    InjectorProcess,
    MillraceChild,
    NodeProcess,
    SinkProcess,
    SourceDriver,
    alive,
    chaos_kills,
    chaos_rng,
    forwarding_deployment,
    free_port,
    jittered_records,
    numbered_records,
    stop_gracefully,
)
from tests.support.quiescence import wait_quiescent
from tests.support.store_files import STATE, fill_outbox_with_tombstone_files
from tests.support.waiting import wait_until

__all__ = [
    "CollectingSink",
    "DeliveryEndpoint",
    "InjectorProcess",
    "ManualClock",
    "RandomKills",
    "MillraceChild",
    "NodeProcess",
    "ROOT",
    "STATE",
    "SinkProcess",
    "SourceDriver",
    "alive",
    "chaos_kills",
    "chaos_rng",
    "faketime_library",
    "fill_outbox_with_tombstone_files",
    "forwarding_deployment",
    "free_port",
    "jittered_records",
    "numbered_records",
    "stop_gracefully",
    "wait_quiescent",
    "wait_until",
]
