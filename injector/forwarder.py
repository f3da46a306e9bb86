"""``Forwarder``: from a stream's log to the intervals of its first computations.

Reads the log and routes each record to every consuming computation's
interval (by that consumer's key extractor), delivering it with the same
``DownstreamSender`` nodes use (batching, backpressure, retries). Each
consumer has its own acknowledged offset (it acked everything below it),
attributed by the consumer named in each production's outbox key. All of
them are persisted together in ``forwarded.json`` (temp file + fsync +
rename)::

    {"stream": "clicks", "acked_offset": 120, "consumers": {"counts": 120, "audit": 340}}

``acked_offset`` is the minimum (what the log may delete). A restarted
injector reads from the minimum and sends a record only to the consumers
whose own offset is not past it; whatever it re-forwards, the nodes' dedup
drops. A file without ``consumers`` (the earlier format) gives every
consumer its ``acked_offset``, and so does a current file to a consumer it
does not name (one added to the topology since).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from millrace.computations import Layout, Topology
from millrace.dataplane import AckBook, LogBatch
from millrace.delivery import Origin
from millrace.deployment import write_json_durably
from millrace.engine import (
    FRAME_BYTES,
    SINK_PREFIX,
    Frame,
    Route,
    routes_of,
    source_name,
)
from millrace.injector.log import LogTailLostError, StreamLog

log = logging.getLogger(__name__)

INJECTOR = "injector"


READ_BATCH = 16_000
"""Records read from the log per step, and so the most a frame to one interval holds.
Under load a node then takes one big delivery per turn: its per-delivery and per-commit
costs (gRPC messages, acks, a commit and a timer round) are spread over more records;
the standard workload end to end ran 8-13% faster at 8,000 than at 2,000 and again at
16,000 than at 8,000 (BENCHMARKS.md). Below saturation a step reads what is there,
so frames stay small and latency is unchanged."""

READ_BYTES = FRAME_BYTES
"""A step's records stop before their keys and values pass this many bytes (a bigger
record goes alone: ingest takes none over 4 MiB), so a frame stays far below gRPC's
64 MiB message limit whatever the records' size: 16,000 records of 4 KiB would not."""

STATE_FILE = "forwarded.json"
"""Where a stream's forwarding offsets live, in the stream's log directory."""


def set_acknowledged(stream_dir: Path, stream: str, consumer: str, offset: int) -> None:
    """Record in ``forwarded.json`` that ``consumer`` acknowledged every offset of
    ``stream`` below ``offset`` (a state bootstrap; the injector must be stopped)."""
    path = stream_dir / STATE_FILE
    state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    consumers = {str(name): int(value) for name, value in state.get("consumers", {}).items()}
    consumers[consumer] = offset
    write_json_durably(
        path, {"stream": stream, "acked_offset": min(consumers.values()), "consumers": consumers}
    )


def load_acknowledged(state_path: Path) -> tuple[int, dict[str, int]]:
    """What ``forwarded.json`` says was acknowledged: the stream's offset (for consumers
    it does not name) and each consumer's; ``(0, {})`` without the file."""
    try:
        state = json.loads(state_path.read_text())
    except FileNotFoundError:
        return 0, {}
    consumers = {str(name): int(offset) for name, offset in state.get("consumers", {}).items()}
    if "acked_offset" in state:
        default = int(state["acked_offset"])
    else:
        default = min(consumers.values(), default=0)
    return default, consumers


class Submitter(Protocol):
    """Where frames for one destination interval go (a ``DownstreamSender`` that
    follows the interval's owner; tests pass fakes)."""

    def submit_frames(self, origin: Origin, frames: Sequence[Frame]) -> None:
        """Queue frames for delivery; acks come back through :meth:`Forwarder.acked_keys`."""


_CONSUMER_END = -21
"""Where an outbox key's consumer name ends (before 0x00, the interval, the record id)."""


@dataclass(eq=False)
class _Consumer:
    """One computation reading the stream, and what it has not acknowledged yet."""

    name: str
    route: Route
    floor: int = 0
    """It acknowledged every offset below this before a restart: never sent again."""
    acked_offset: int = 0
    """It acknowledged every offset below this."""
    unacked: AckBook = field(default_factory=AckBook)
    """Offsets sent to it and not acknowledged, with the oldest event time in flight
    (natively: an ack is a lookup by offset, not a hash per record)."""


class Forwarder:
    """Forwards one stream; thread-safe callbacks from its senders."""

    def __init__(
        self,
        stream_log: StreamLog,
        topology: Topology,
        sender: Callable[[str, int], Submitter],
        state_path: Path,
        *,
        read_batch: int = READ_BATCH,
    ) -> None:
        self.log = stream_log
        self._topology = topology
        self.stream = stream_log.stream
        self._tag = stream_log.stream_tag
        self._origin = Origin("", 0, 0, sequence=source_name(stream_log.stream))
        self._consumers = {
            route.consumer: _Consumer(route.consumer, route)
            for route in routes_of(topology, self.stream)
            if not route.consumer.startswith(SINK_PREFIX)
        }
        self._sender = sender
        self._state_path = state_path
        self._read_batch = read_batch
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        # Retention may have deleted segments past the last persisted offsets (it uses the
        # in-memory minimum): whatever was deleted had been acknowledged by every consumer.
        first = stream_log.first_offset
        default, loaded = self._load()
        self._refuse_lost_tail(stream_log, default, loaded)
        for consumer in self._consumers.values():
            offset = max(loaded.get(consumer.name, default), first)
            consumer.floor = consumer.acked_offset = offset
        self._next = min((c.floor for c in self._consumers.values()), default=max(default, first))
        self.acked_offset = self._next
        """Every consumer acknowledged every offset below this (the minimum over them)."""
        self._saved = self._offsets()
        self._thread = threading.Thread(
            target=self._run, name=f"forward-{self.stream}", daemon=True
        )

    def _load(self) -> tuple[int, dict[str, int]]:
        """The persisted offsets: the stream's (for consumers not named) and per consumer."""
        return load_acknowledged(self._state_path)

    def _refuse_lost_tail(
        self, stream_log: StreamLog, default: int, loaded: dict[str, int]
    ) -> None:
        """Raise :class:`LogTailLostError` if a consumer acknowledged offsets the log no
        longer holds: new records would get their record ids, and be dropped as duplicates."""
        consumers = {name: loaded.get(name, default) for name in self._consumers}
        name, acked = max(consumers.items(), key=lambda item: item[1], default=("", default))
        if acked > stream_log.next_offset:
            who = f"computation {name!r}" if name else "every consumer"
            raise LogTailLostError(
                str(stream_log.directory),
                stream_log.next_offset,
                acked,
                f"{who} ({self._state_path})",
            )

    def _offsets(self) -> dict[str, int]:
        with self._lock:
            return {name: c.acked_offset for name, c in self._consumers.items()}

    def _save(self) -> None:
        """Persist every consumer's acknowledged offset in one atomic write."""
        offsets = self._offsets()
        if offsets == self._saved:
            return
        write_json_durably(
            self._state_path,
            {
                "stream": self.stream,
                "acked_offset": min(offsets.values(), default=self.acked_offset),
                "consumers": offsets,
            },
        )
        self._saved = offsets

    def start(self) -> None:
        """Start forwarding from the acknowledged offset."""
        self._thread.start()

    def stop(self) -> None:
        """Stop forwarding and persist the acknowledged offset."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(5)
        try:
            self._save()
        except OSError as exc:
            log.error("forwarding %s: offsets not saved at stop: %s", self.stream, exc)

    def appended(self) -> None:
        """New records are durable in the log (called after each group commit)."""
        self._wake.set()

    @property
    def forwarded_offset(self) -> int:
        """Offsets below this have been handed to the senders."""
        return self._next

    @property
    def consumers(self) -> tuple[str, ...]:
        """The computations reading this stream."""
        return tuple(self._consumers)

    def consumer_acked_offset(self, consumer: str) -> int:
        """``consumer`` acknowledged every offset below this."""
        with self._lock:
            return self._consumers[consumer].acked_offset

    def lag_records(self, consumer: str | None = None) -> int:
        """Durable records not yet acknowledged by ``consumer`` (None: by every consumer)."""
        acked = self.acked_offset if consumer is None else self.consumer_acked_offset(consumer)
        return max(0, self.log.next_offset - acked)

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
                try:
                    self._save()
                except OSError as exc:  # a full disk: resent after a restart, deduplicated
                    log.error("forwarding %s: offsets not saved: %s", self.stream, exc)
                last_save = time.monotonic()

    def _step(self) -> None:
        records = self.log.read_batch(self._next, self._read_batch).head_within(READ_BYTES)
        first = records.first_offset
        if first is None:
            self._wake.wait(0.05)
            self._wake.clear()
            return
        self._forward(records, first)
        with self._lock:
            self._next = first + len(records)
            # Every ack may have come back before ``_next`` moved: nothing would move
            # the acknowledged offsets past these records until the next ack.
            self._settle_locked()

    def _forward(self, records: LogBatch, first: int) -> None:
        """Frame ``records`` (consecutive offsets from ``first``) for every consumer and
        hand the frames to the senders. The frames are built natively
        (:meth:`LogBatch.frames`) with the outbox keys and oldest event time the senders
        and the in-flight book account by; nothing parses them back."""
        stream, count = self.stream, len(records)
        frames: list[Frame] = []
        with self._lock:
            for consumer in self._consumers.values():
                # Offsets below its floor were acknowledged before a restart: its node has them.
                start = max(0, consumer.floor - first)
                if start >= count:
                    continue
                route, name = consumer.route, consumer.name
                built = records.frames(
                    name,
                    route.intervals,
                    _intervals(route, records),
                    start,
                    stream_tag=self._tag,
                    producer=INJECTOR,
                    stream=stream,
                )
                consumer.unacked.send(first, start, count, [(f[2], f[4]) for f in built])
                for interval, payload, slots, keys, oldest in built:
                    # Offsets are the positions receivers forget record ids by.
                    positions = (first + slots[0], first + slots[-1])
                    frame = Frame(
                        name, interval, None, payload, positions,
                        outbox_keys=keys, oldest_event_time_ms=oldest,
                    )  # fmt: skip
                    frames.append(frame)
        for frame in frames:
            self._sender(frame.consumer, frame.interval).submit_frames(self._origin, [frame])

    def route_by(self, layouts: Mapping[str, Layout]) -> None:
        """Route to the consumers' intervals now (``layouts``: those with split ones);
        what was sent to a split interval is routed again by whoever holds it."""
        routes = {r.consumer: r for r in routes_of(self._topology, self.stream, layouts)}
        with self._lock:
            for consumer in self._consumers.values():
                consumer.route = routes[consumer.name]

    def _settle_locked(self) -> None:
        """Under the lock: recompute every consumer's acknowledged offset and the minimum."""
        for consumer in self._consumers.values():
            pending = consumer.unacked.first_pending()
            consumer.acked_offset = max(consumer.floor, self._next) if pending is None else pending
        self.acked_offset = min(
            (c.acked_offset for c in self._consumers.values()), default=self._next
        )

    # -- acknowledgements (routed here by the injector) ----------------------------

    def acked_keys(self, outbox_keys: list[bytes]) -> None:
        """Consumers acknowledged (or refused for good) these productions of this stream.

        The consumer is the one the outbox key names; a repeated ack changes nothing.
        """
        # consumer | 0x00 | interval u32 | record id (stream tag, offset u64): an ack is
        # of one destination, so its first key names the consumer of (nearly) all.
        rest = outbox_keys
        with self._lock:
            while rest:
                name = rest[0][:_CONSUMER_END]
                consumer = self._consumers.get(name.decode(errors="replace"))
                if consumer is None:
                    rest = [key for key in rest if key[:_CONSUMER_END] != name]
                else:
                    rest = consumer.unacked.ack_keys(rest, name)
            self._settle_locked()

    def oldest_unfinished_ms(self, consumer: str | None = None) -> int | None:
        """The oldest event time forwarded but not acked by ``consumer`` (None: by any
        consumer); appended but not yet forwarded records are the injector's to track."""
        with self._lock:
            if consumer is not None:
                return self._consumers[consumer].unacked.oldest_ms()
            times = [c.unacked.oldest_ms() for c in self._consumers.values()]
            return min((t for t in times if t is not None), default=None)


def _intervals(route: Route, records: LogBatch) -> list[int] | None:
    """Each record's interval of ``route`` when its key extractor is the user's; None
    when records are keyed by their own key (the frames hash it natively)."""
    if route.single or (route.keyed_as_sent and not route.table):
        return None
    return route.intervals_for(records.keys(), records.values())
