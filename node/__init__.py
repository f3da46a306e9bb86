"""A computation node: the process that hosts key intervals of one computation.

:class:`Node` opens each hosted interval's store, registers with the
injector's ownership registry (leases, fencing), serves ``Delivery`` and
``Admin``, follows the watermark authority, and runs one worker thread per
interval that drives the ``engine`` and hands frames to ``delivery``.
"""

from millrace.node._node import Node
from millrace.node._worker import IntervalWorker

__all__ = ["IntervalWorker", "Node"]
