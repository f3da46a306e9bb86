"""Interpreter settings for a long-running Millrace service (node, injector, sink).

Two CPython settings matter to a stream processor:

* the GIL switch interval (how long a thread waiting for the GIL lets the
  running one keep it): in a process whose threads mostly hand work to each
  other (the injector's handlers and log writer, ``millrace inject``'s parser and
  sender) each handoff may wait that long, so they shorten it to 0.5 ms. A node
  or sink has one busy worker thread per interval; there the short interval made
  gRPC threads take the GIL from the worker every 0.5 ms, a forced switch each
  time, so they keep CPython's 5 ms: measured, ``node_bench`` at half load p99
  42-49 ms -> 25-29 ms and the standard workload end to end 8-10% faster
  (``BENCHMARKS.md``);
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

HANDOFF_SWITCH_INTERVAL_S = 0.0005
"""For processes whose threads mostly hand work to each other (injector, inject)."""
WORKER_SWITCH_INTERVAL_S = 0.005
"""For processes with a busy worker thread per interval (node, sink): CPython's default."""
YOUNG_THRESHOLD = 50_000
"""Net new container objects before a young collection: most in-flight objects are
freed by then, so few are promoted (CPython's default is 700)."""
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 100


def tune_threads(switch_interval_s: float) -> None:
    """Set the GIL switch interval (one of the two above); call first thing in a
    service's main."""
    sys.setswitchinterval(switch_interval_s)


def settle_garbage_collector() -> None:
    """Call once a service has started: its startup objects (modules, stores, servers)
    move to the permanent generation no collection walks, and young collections run
    rarely enough that short-lived record objects die before one sees them. Cycles are
    still collected, just later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
