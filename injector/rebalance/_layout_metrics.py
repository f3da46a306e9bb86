"""The layout's Prometheus gauges and counters (``docs/metrics.md``), read at scrape time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from millrace.deployment import NodePlacement
from millrace.injector.ownership import OwnershipRegistry
from millrace.injector.rebalance._layout import interval_places
from millrace.injector.rebalance._loads import LoadTable


class LayoutMetrics(Collector):
    """Moves by reason, each interval's node and load, the nodes live and drained."""

    def __init__(
        self, registry: OwnershipRegistry, loads: LoadTable, nodes: Mapping[str, NodePlacement]
    ) -> None:
        self._registry = registry
        self._loads = loads
        self._nodes = nodes

    def collect(self) -> Iterable[Metric]:
        moves = CounterMetricFamily(
            "millrace_interval_moves",
            "Interval moves recorded since the injector started, by why "
            "(operator, drain, rebalance, split, merge)",
            labels=["computation", "reason"],
        )
        for (computation, reason), count in sorted(self._registry.moves_by_reason.items()):
            moves.add_metric([computation, reason], count)
        yield moves
        rate = GaugeMetricFamily(
            "millrace_interval_records_per_second",
            "Records committed per second by each interval, as its node reports (smoothed)",
            labels=["computation", "interval", "node"],
        )
        cpu = GaugeMetricFamily(
            "millrace_interval_cpu_ratio",
            "CPU seconds per second each interval's worker thread uses, as its node reports "
            "(smoothed; what the rebalancer weighs)",
            labels=["computation", "interval", "node"],
        )
        moving = GaugeMetricFamily(
            "millrace_interval_moving",
            "1 while a recorded move of the interval is under way",
            labels=["computation", "interval"],
        )
        for computation in sorted({node.computation for node in self._nodes.values()}):
            rates, shares = self._loads.rates(computation), self._loads.cpu(computation)
            for index, place in interval_places(self._registry, self._nodes, computation).items():
                labels = [computation, str(index)]
                rate.add_metric([*labels, place.holder], rates.get(index, 0.0))
                cpu.add_metric([*labels, place.holder], shares.get(index, 0.0))
                moving.add_metric(labels, 1.0 if place.moving else 0.0)
        yield rate
        yield cpu
        yield moving
        nodes = GaugeMetricFamily(
            "millrace_node_state",
            "Each node of the deployment: live (reported within 5 s) and draining, 1 or 0",
            labels=["node", "state"],
        )
        drained = self._registry.draining()
        for name in sorted(self._nodes):
            nodes.add_metric([name, "live"], 1.0 if self._loads.is_live(name) else 0.0)
            nodes.add_metric([name, "draining"], 1.0 if name in drained else 0.0)
        yield nodes
