"""Interpreter settings for a long-running Millrace service (node, injector, sink).

Two CPython defaults cost a stream processor latency:

* the 5 ms GIL switch interval: a record crosses several threads per hop (gRPC
  reader, worker, sender), and each handoff can wait that long behind a busy
  worker;
* the cyclic garbage collector's thresholds: the objects of an in-flight record
  live a few milliseconds, long enough to survive young collections, so they are
  promoted and soon trigger full collections. A full collection walks every
  tracked object, the service's startup objects included, while holding the GIL:
  25-100 ms pauses, about one per second per node at 20,000 records/s (measured
  with ``gc.callbacks`` in the node benchmark).
"""

from __future__ import annotations

import gc
import sys

SWITCH_INTERVAL_S = 0.0005
YOUNG_THRESHOLD = 50_000
"""Net new container objects before a young collection: most in-flight objects are
freed by then, so few are promoted (CPython's default is 700)."""
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 100


def tune_threads() -> None:
    """Short GIL switch interval; call first thing in a service's main."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def settle_garbage_collector() -> None:
    """Call once a service has started: its startup objects (modules, stores, servers)
    move to the permanent generation no collection walks, and young collections run
    rarely enough that short-lived record objects die before one sees them. Cycles are
    still collected, just later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
