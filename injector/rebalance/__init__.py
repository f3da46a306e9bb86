"""Where intervals run, by load: the rebalancer, node drains and what they read.

Nodes report their intervals' work (``Control.ReportLoad``) into a
:class:`LoadTable`; the :class:`Rebalancer` (``[rebalance] enabled``) records at most
one move, split or merge per period through the ownership registry, and :func:`plan_drain` spreads a
drained node's intervals over the other live nodes of its computation.
:func:`interval_places` is where each interval runs or goes; :class:`LayoutMetrics`
shows the layout and its changes to Prometheus.
"""

from millrace.injector.rebalance._layout import IntervalPlace, interval_places, takers
from millrace.injector.rebalance._layout_metrics import LayoutMetrics
from millrace.injector.rebalance._loads import LIVE_S, IntervalSample, LoadTable
from millrace.injector.rebalance._policy import Proposal, plan_drain, plan_merge, plan_move
from millrace.injector.rebalance._rebalancer import Rebalancer

__all__ = [
    "LIVE_S",
    "IntervalPlace",
    "IntervalSample",
    "LayoutMetrics",
    "LoadTable",
    "Proposal",
    "Rebalancer",
    "interval_places",
    "plan_drain",
    "plan_merge",
    "plan_move",
    "takers",
]
