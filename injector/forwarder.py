"""``Forwarder``: from a stream's log to the intervals of its first computations.

Reads the log from the acknowledged offset, routes each record to every
consuming computation's interval (by that consumer's key extractor),
delivers it with the same ``DownstreamSender`` nodes use (batching,
backpressure, retries), and advances the acknowledged offset once every
consumer has acked everything below it. That offset is persisted (temp file
+ fsync + rename) so a restarted injector resumes there; whatever it
re-forwards, the nodes' dedup drops.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from computations import Topology, interval_of
from computations._outbox import OldestInFlight, Production
from computations._sender import DownstreamSender, Origin
from injector.log import LogRecord, StreamLog
from millrace._service_support import write_json_atomically
from millrace.wire.v1 import record_pb2

log = logging.getLogger(__name__)

INJECTOR = "injector"
ORIGIN = Origin("", 0, 0)


class Forwarder:
    """Forwards one stream; thread-safe callbacks from its senders."""

    def __init__(
        self,
        stream_log: StreamLog,
        topology: Topology,
        address_of: Callable[[str, int], str],
        sender: Callable[[str], DownstreamSender],
        state_path: Path,
        *,
        read_batch: int = 2000,
    ) -> None:
        self.log = stream_log
        self.stream = stream_log.stream
        self._consumers = [
            (c.name, c.intervals, topology.key_extractor(c.name, self.stream))
            for c in topology.consumers(self.stream)
        ]
        self._address_of = address_of
        self._sender = sender
        self._state_path = state_path
        self._read_batch = read_batch
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pending: OrderedDict[int, int] = OrderedDict()  # offset -> deliveries unacked
        self.in_flight = OldestInFlight()
        # Retention may have deleted segments past the last persisted offset (it uses the
        # in-memory one): whatever was deleted had been acknowledged by every consumer.
        self.acked_offset = max(self._load(), stream_log.first_offset)
        self._next = self.acked_offset
        self._saved = self.acked_offset
        self._thread = threading.Thread(
            target=self._run, name=f"forward-{self.stream}", daemon=True
        )

    def _load(self) -> int:
        try:
            return int(json.loads(self._state_path.read_text())["acked_offset"])
        except FileNotFoundError:
            return 0

    def _save(self) -> None:
        with self._lock:
            offset = self.acked_offset
        if offset == self._saved:
            return
        write_json_atomically(self._state_path, {"stream": self.stream, "acked_offset": offset})
        self._saved = offset

    def start(self) -> None:
        """Start forwarding from the acknowledged offset."""
        self._thread.start()

    def stop(self) -> None:
        """Stop forwarding and persist the acknowledged offset."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(5)
        self._save()

    def appended(self) -> None:
        """New records are durable in the log (called after each group commit)."""
        self._wake.set()

    @property
    def forwarded_offset(self) -> int:
        """Offsets below this have been handed to the senders."""
        return self._next

    def lag_records(self) -> int:
        """Durable records not yet acknowledged by every consumer."""
        return self.log.next_offset - self.acked_offset

    def _run(self) -> None:
        last_save = time.monotonic()
        while not self._stopping.is_set():
            try:
                self._step()
            except Exception:
                # A log that cannot be read now (a disk error, a segment deleted under us)
                # must not end forwarding for good: say so and try again.
                log.exception("forwarding %s from offset %d failed", self.stream, self._next)
                self._stopping.wait(1.0)
            if time.monotonic() - last_save > 0.2:
                self._save()
                last_save = time.monotonic()

    def _step(self) -> None:
        records = self.log.read(self._next, self._read_batch)
        if not records:
            self._wake.wait(0.05)
            self._wake.clear()
            return
        self._forward(records)
        with self._lock:
            self._next = records[-1].offset + 1
            # Every ack may have come back before ``_next`` moved: nothing would move
            # the acknowledged offset past these records until the next ack.
            self.acked_offset = next(iter(self._pending), self._next)

    def _forward(self, records: list[LogRecord]) -> None:
        by_address: dict[str, list[Production]] = {}
        tracked: list[tuple[bytes, int]] = []
        with self._lock:
            for record in records:
                message = record_pb2.Record(
                    record_id=record.record_id,
                    key=record.key,
                    value=record.value,
                    event_time_ms=record.event_time_ms,
                    producer=INJECTOR,
                    stream=self.stream,
                )
                self._pending[record.offset] = len(self._consumers)
                for name, intervals, extract in self._consumers:
                    try:
                        interval = interval_of(extract(record.key, record.value), intervals)
                    except Exception:
                        # Unkeyable for this consumer: let its node dead-letter it with the reason.
                        interval = 0
                    production = Production.to(name, interval, message)
                    tracked.append((production.outbox_key, record.event_time_ms))
                    by_address.setdefault(self._address_of(name, interval), []).append(production)
            self.in_flight.add_group(tracked)
        for address, productions in by_address.items():
            self._sender(address).submit(ORIGIN, productions)

    # -- acknowledgements (routed here by the injector) ----------------------------

    def acked_keys(self, outbox_keys: list[bytes]) -> None:
        """Consumers acknowledged (or refused for good) these productions of this stream."""
        with self._lock:
            for key in outbox_keys:
                self.in_flight.remove(key)
                offset = int.from_bytes(key[-8:], "big")
                remaining = self._pending.get(offset)
                if remaining is None:
                    continue
                if remaining <= 1:
                    del self._pending[offset]
                else:
                    self._pending[offset] = remaining - 1
            self.acked_offset = next(iter(self._pending), self._next)

    def oldest_unfinished_ms(self) -> int | None:
        """The oldest event time appended-and-forwarded but not acked (appended but not
        yet forwarded records are covered by the injector's own tracking)."""
        with self._lock:
            return self.in_flight.oldest()
