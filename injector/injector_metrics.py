"""Prometheus metrics of the injector (``docs/metrics.md``), in a registry of its own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from millrace.computations import MIN_TIME
from millrace.injector.archive import LogArchiver
from millrace.injector.file_source import FileSource
from millrace.injector.forwarder import Forwarder
from millrace.injector.log import StreamLog
from millrace.injector.source_watermark import SourceWatermark
from millrace.injector.watermark_authority import WatermarkAuthority
from millrace.statestore import wall_clock_ms


class StreamView(Protocol):
    """What the gauges read of an ingest stream at scrape time."""

    log: StreamLog
    forwarder: Forwarder
    watermark: SourceWatermark

    def oldest_unfinished_ms(self, consumer: str | None = None) -> int | None: ...


class InjectorMetrics:
    """Counters updated on the ingest path; gauges read at scrape time."""

    def __init__(
        self,
        streams: Mapping[str, StreamView],
        file_sources: Mapping[str, FileSource],
        authority: WatermarkAuthority,
        *,
        archiver: LogArchiver | None = None,
    ) -> None:
        """The gauges read ``streams``, ``file_sources`` and the archiver as they are at
        each scrape."""
        self.registry = CollectorRegistry()
        self.ingested = Counter(
            "millrace_ingested_records", "Records appended to the durable log and acknowledged",
            ["stream"], registry=self.registry,
        )  # fmt: skip
        self.late_records = Counter(
            "millrace_late_records", "Ingested records already behind the source watermark",
            ["stream"], registry=self.registry,
        )  # fmt: skip
        self.refused = Counter(
            "millrace_refused_records",
            "Records the durable log could not write (disk full, I/O error); clients retry them",
            ["stream"], registry=self.registry,
        )  # fmt: skip
        self.append_seconds = Histogram(
            "millrace_log_append_seconds", "One group commit: write + fsync of the durable log",
            ["stream"], registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )  # fmt: skip
        self.registry.register(_InjectorGauges(streams, file_sources, authority, archiver))


class _InjectorGauges(Collector):
    def __init__(
        self,
        streams: Mapping[str, StreamView],
        file_sources: Mapping[str, FileSource],
        authority: WatermarkAuthority,
        archiver: LogArchiver | None,
    ) -> None:
        self._streams = streams
        self._file_sources = file_sources
        self._authority = authority
        self._archiver = archiver

    def collect(self) -> Iterable[Metric]:
        log_bytes = GaugeMetricFamily(
            "millrace_log_bytes", "Bytes in log segments", labels=["stream"]
        )
        lost = GaugeMetricFamily(
            "millrace_log_lost_records",
            "Offsets recorded as lost by millrace log accept-loss",
            labels=["stream"],
        )
        segments = GaugeMetricFamily("millrace_log_segments", "Log segments", labels=["stream"])
        lag = GaugeMetricFamily(
            "millrace_forwarding_lag_records",
            "Durable records of the stream not yet acknowledged by the consuming computation",
            labels=["stream", "consumer"],
        )
        lag_s = GaugeMetricFamily(
            "millrace_forwarding_lag_seconds",
            "Wall clock minus the event time of the consumer's oldest unacknowledged record",
            labels=["stream", "consumer"],
        )
        rejected = CounterMetricFamily(
            "millrace_file_source_rejected_lines",
            "Malformed lines of a file source, written to its rejects file",
            labels=["stream"],
        )
        idle = CounterMetricFamily(
            "millrace_idle_source_advances",
            "Watermark advances of an idle source",
            labels=["stream"],
        )
        watermark = GaugeMetricFamily(
            "millrace_low_watermark_ms", "Published low watermark", labels=["computation"]
        )
        watermark_lag = GaugeMetricFamily(
            "millrace_watermark_lag_seconds", "Wall clock minus the published low watermark",
            labels=["computation"],
        )  # fmt: skip
        pending = GaugeMetricFamily(
            "millrace_archive_pending_segments",
            "Sealed log segments not yet copied to the archive (archive_uri)",
            labels=["stream"],
        )
        now_ms = wall_clock_ms()
        for name, stream in list(self._streams.items()):
            if self._archiver is not None:
                pending.add_metric([name], self._archiver.pending(name))
            infos = stream.log.segments()
            log_bytes.add_metric([name], sum(i.size_bytes for i in infos))
            segments.add_metric([name], len(infos))
            lost.add_metric([name], sum(r.records for r in stream.log.lost))
            for consumer in stream.forwarder.consumers:
                lag.add_metric([name, consumer], stream.forwarder.lag_records(consumer))
                oldest = stream.oldest_unfinished_ms(consumer)
                # MIN_TIME: just restarted, the unacknowledged tail is not re-read (age unknown).
                age_s = 0.0 if oldest is None or oldest <= MIN_TIME else (now_ms - oldest) / 1000
                lag_s.add_metric([name, consumer], max(0.0, age_s))
            idle.add_metric([name], stream.watermark.idle_advances)
        for name, source in list(self._file_sources.items()):
            rejected.add_metric([name], source.lines_rejected)
        for name, mark in self._authority.watermarks().items():
            if mark > MIN_TIME:
                watermark.add_metric([name], mark)
                watermark_lag.add_metric([name], max(0.0, (now_ms - mark) / 1000))
        yield from (log_bytes, segments, lost, lag, lag_s, idle, rejected, watermark)
        yield watermark_lag
        if self._archiver is not None:
            yield pending
