"""Prometheus metrics of one node, in a registry of its own (many nodes can share a process).

Counters and histograms are updated by the workers; gauges are read from
the processors and senders when Prometheus scrapes. Names are documented in
``docs/metrics.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from millrace.computations import MIN_TIME, IntervalId
from millrace.delivery import DownstreamSender
from millrace.engine import BatchOutcome, IntervalProcessor
from millrace.statestore import wall_clock_ms
from millrace.statestore.errors import StateStoreError


class NodeMetrics:
    """Every metric a node exports."""

    def __init__(
        self,
        processors: Mapping[IntervalId, IntervalProcessor],
        senders: Callable[[], Iterable[DownstreamSender]],
        fenced: Callable[[str, int], bool] = lambda name, interval: False,
    ) -> None:
        self.registry = CollectorRegistry()
        labels = ["computation"]
        self.records_in = Counter(
            "millrace_records_in",
            "Records delivered to a computation (incl. duplicates)",
            labels,
            registry=self.registry,
        )
        self.records_committed = Counter(
            "millrace_records_committed", "Records newly committed", labels, registry=self.registry
        )
        self.records_out = Counter(
            "millrace_records_out",
            "Productions committed to the outbox",
            labels,
            registry=self.registry,
        )
        self.duplicates = Counter(
            "millrace_duplicates_dropped",
            "Redelivered records dropped by dedup",
            labels,
            registry=self.registry,
        )
        self.dead_letters = Counter(
            "millrace_dead_letters",
            "Records moved to the dead-letter store",
            labels,
            registry=self.registry,
        )
        self.stale_refusals = Counter(
            "millrace_stale_refusals",
            "Deliveries of this node's intervals a receiver refused as stale (it saw a newer "
            "epoch of the interval)",
            labels,
            registry=self.registry,
        )
        self.lease_conflicts = Counter(
            "millrace_lease_conflicts",
            "Lease conflicts this node found and could not resolve (an interval leased "
            "elsewhere at an epoch not above its own: the registry lost what it granted); "
            "each also an error in the log and the interval's fenced reason in its status",
            labels,
            registry=self.registry,
        )
        self.timers_fired = Counter(
            "millrace_timers_fired", "Timers fired", labels, registry=self.registry
        )
        self.commit_seconds = Histogram(
            "millrace_commit_seconds",
            "Dedup + user code + atomic commit of one batch",
            labels,
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
        )
        self.batch_records = Histogram(
            "millrace_batch_records", "Records per commit", labels, registry=self.registry,
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2000, 4000),
        )  # fmt: skip
        self.late_lateness = Histogram(
            "millrace_late_record_lateness_seconds",
            "How far behind the low watermark records came that were too late to change a "
            "result (reported by user code: Context.report_late)",
            labels,
            registry=self.registry,
            buckets=(0.1, 1, 5, 30, 60, 300, 900, 3600, 6 * 3600, 86400),
        )
        self.registry.register(_Gauges(processors, senders, fenced))

    def committed(self, computation: str, outcome: BatchOutcome, seconds: float) -> None:
        """Account for one commit."""
        delivered = len(outcome.committed) + len(outcome.duplicates) + len(outcome.retry)
        if delivered:
            self.records_in.labels(computation).inc(delivered)
            self.batch_records.labels(computation).observe(delivered)
            self.commit_seconds.labels(computation).observe(seconds)
        self.records_committed.labels(computation).inc(len(outcome.committed))
        self.duplicates.labels(computation).inc(len(outcome.duplicates))
        self.dead_letters.labels(computation).inc(len(outcome.dead_lettered))
        self.records_out.labels(computation).inc(outcome.produced)
        self.timers_fired.labels(computation).inc(outcome.timers_fired)
        if outcome.late_ms:
            late = self.late_lateness.labels(computation)
            for lateness_ms in outcome.late_ms:
                late.observe(lateness_ms / 1000)


class _Gauges(Collector):
    """Values read at scrape time from the processors and senders."""

    def __init__(
        self,
        processors: Mapping[IntervalId, IntervalProcessor],
        senders: Callable[[], Iterable[DownstreamSender]],
        fenced: Callable[[str, int], bool],
    ) -> None:
        self._processors = processors
        self._senders = senders
        self._fenced = fenced

    def collect(self) -> Iterable[Metric]:
        labels = ["computation", "interval"]
        outbox = GaugeMetricFamily(
            "millrace_outbox_size", "Unacknowledged productions", labels=labels
        )
        age = GaugeMetricFamily(
            "millrace_outbox_oldest_age_seconds",
            "Age of the oldest unacknowledged production",
            labels=labels,
        )
        timers = GaugeMetricFamily(
            "millrace_timers_pending", "Timers set, not fired", labels=labels
        )
        watermark = GaugeMetricFamily(
            "millrace_input_low_watermark_ms", "Input low watermark (ms since epoch)", labels=labels
        )
        lag = GaugeMetricFamily(
            "millrace_input_watermark_lag_seconds",
            "Wall clock minus input low watermark",
            labels=labels,
        )
        dedup = {
            name: CounterMetricFamily(f"millrace_dedup_{name}", help_, labels=labels)
            for name, help_ in (
                ("lookups", "Record ids checked for duplicates"),
                ("bloom_negatives", "Checks answered by the Bloom filters alone"),
                ("store_confirmations", "Duplicates confirmed in RocksDB after a Bloom 'maybe'"),
                ("false_positives", "Bloom 'maybe's that RocksDB did not confirm"),
            )
        }
        fenced = GaugeMetricFamily(
            "millrace_interval_fenced", "1 once a newer owner fenced this interval", labels=labels
        )
        epoch = GaugeMetricFamily("millrace_interval_epoch", "Owner epoch", labels=labels)
        rows = GaugeMetricFamily(
            "millrace_store_rows",
            "Rows in the interval's store per column family (RocksDB's estimate): state, "
            "dedup ids, timers, outbox frames, metadata",
            labels=[*labels, "column"],
        )
        now_ms = wall_clock_ms()
        for (name, interval), processor in list(self._processors.items()):
            status = processor.status()
            values = [name, str(interval)]
            fenced.add_metric(values, 1 if self._fenced(name, interval) else 0)
            epoch.add_metric(values, status.epoch)
            outbox.add_metric(values, status.outbox_size)
            age.add_metric(values, status.oldest_unacked_age_s)
            timers.add_metric(values, status.pending_timers)
            mark = status.input_watermark
            if mark is not None and mark > MIN_TIME:
                watermark.add_metric(values, mark)
                lag.add_metric(values, max(0.0, (now_ms - mark) / 1000))
            stats = status.dedup
            dedup["lookups"].add_metric(values, stats.lookups)
            dedup["bloom_negatives"].add_metric(values, stats.bloom_negatives)
            dedup["store_confirmations"].add_metric(values, stats.confirmations)
            dedup["false_positives"].add_metric(values, stats.false_positives)
            try:
                for column, count in processor.store.estimated_rows().items():
                    rows.add_metric([*values, column], count)
            except StateStoreError:
                pass  # closed under the scrape: the interval is being handed over
        retries = CounterMetricFamily(
            "millrace_delivery_retries", "Productions resent after no ack", labels=["destination"]
        )
        queued = GaugeMetricFamily(
            "millrace_delivery_queued",
            "Productions awaiting an ack, per destination",
            labels=["destination"],
        )
        by_address: dict[str, tuple[int, int]] = {}
        for sender in self._senders():  # one sender per destination interval
            retried, waiting = by_address.get(sender.address, (0, 0))
            by_address[sender.address] = (retried + sender.retried, waiting + sender.queued)
        for address, (retried, waiting) in sorted(by_address.items()):
            retries.add_metric([address], retried)
            queued.add_metric([address], waiting)
        yield from (outbox, age, timers, watermark, lag, fenced, epoch, rows, *dedup.values())
        yield from (retries, queued)
