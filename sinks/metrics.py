"""A sink's Prometheus metrics, read from its counters at scrape time (no cost per record)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from millrace.sinks._indexed_sink import IndexedSink


class SinkCollector(Collector):
    """``millrace_sink_*`` of one sink stream: records written, duplicates dropped, and
    records held (the next record's position)."""

    def __init__(self, stream: str, sink: IndexedSink) -> None:
        self._stream = stream
        self._sink = sink

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        labels = ["stream"]
        written = CounterMetricFamily(
            "millrace_sink_records_written", "Records this sink process wrote (once each).",
            labels=labels,
        )  # fmt: skip
        written.add_metric([self._stream], self._sink.written)
        duplicates = CounterMetricFamily(
            "millrace_sink_duplicates",
            "Records delivered again after they were written, acknowledged and dropped.",
            labels=labels,
        )
        duplicates.add_metric([self._stream], self._sink.duplicates)
        held = GaugeMetricFamily(
            "millrace_sink_records", "Records the sink's output holds.", labels=labels
        )
        held.add_metric([self._stream], len(self._sink))
        yield from (written, duplicates, held)


def sink_registry(stream: str, sink: IndexedSink) -> CollectorRegistry:
    """A registry holding one sink's metrics (a process serves one sink)."""
    registry = CollectorRegistry()
    registry.register(SinkCollector(stream, sink))
    return registry


__all__ = ["SinkCollector", "sink_registry"]
