"""What every exactly-once sink shares: dedup by record id, positions, the latest per key.

A sink numbers the records it has written 0, 1, 2, ... (their *positions*,
what ``Subscribe`` resumes from) and remembers the record ids it has written
(:class:`~sinks._sink_index.SinkIndex`, on disk beside the output), so a resent
record is acknowledged as a duplicate and never written twice. Subclasses store
the records, keep the index, and implement ``__len__`` and ``read``.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from millrace.deployment import brief
from millrace.engine import SINK_PREFIX, any_valid_epoch, sender_progress
from millrace.event_time import event_time_problem
from millrace.sinks._sink_index import SinkIndex
from millrace.statestore import StoreConfig
from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2

MAX_RECORD_ID_BYTES = 1024
NOT_OWNER = delivery_pb2.NOT_OWNER
MALFORMED_RECORD = delivery_pb2.MALFORMED_RECORD
UNKNOWN_SENDER_EPOCH = delivery_pb2.UNKNOWN_SENDER_EPOCH


def _record_problem(record: record_pb2.Record) -> str | None:
    """Why a sink will not write ``record`` (None: it will)."""
    if not record.record_id:
        return "record has no record_id"
    if len(record.record_id) > MAX_RECORD_ID_BYTES:
        return f"record_id is {len(record.record_id)} bytes; the limit is {MAX_RECORD_ID_BYTES}"
    return event_time_problem(record.event_time_ms)


class SinkUnavailableError(Exception):
    """The sink cannot write now (a full disk, an I/O error); nothing of the batch was
    kept or acknowledged. Answered as ``UNAVAILABLE``: the sender resends later."""


class SinkLockedError(Exception):
    """Another process writes this sink's output: stop it, or give this sink another path."""


def lock_beside(path: Path) -> int:
    """Take the exclusive lock of the sink output ``path`` (a ``.NAME.lock`` file beside
    it), so two sink processes never append to one output. Returns the lock's descriptor."""
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SinkLockedError(
            f"sink output {str(path)!r} is written by another process (lock {str(lock)!r}); "
            "stop it or point this sink elsewhere"
        ) from None
    return fd


class IndexedSink(delivery_pb2_grpc.DeliveryServicer):
    """Base of the sinks: serve with ``delivery_pb2_grpc.add_DeliveryServicer_to_server``."""

    stream = ""
    """The sink stream served (set by ``millrace sink``): batches for another target are
    refused NOT_OWNER. Empty: any target (a sink used on its own)."""

    def __init__(self, index_path: Path, index_config: StoreConfig | None = None) -> None:
        """``index_path``: the directory of the output's :class:`SinkIndex`, a store of
        ``index_config`` (its dedup retention)."""
        self._lock = threading.Lock()  # guards the index and the read side
        self._grew = threading.Condition(self._lock)
        self._index = SinkIndex(index_path, config=index_config)
        self.written = 0
        self.duplicates = 0

    def __len__(self) -> int:
        """How many records are written (the next record's position)."""
        raise NotImplementedError

    def read(self, position: int, limit: int) -> list[tuple[int, record_pb2.Record]]:
        """Up to ``limit`` records from ``position`` on, with their positions."""
        raise NotImplementedError

    def _refusal(self, batch: delivery_pb2.DeliveryBatch) -> tuple[int, str] | None:
        """Why this sink refuses every record of ``batch`` (None: it takes them)."""
        target = batch.target.computation
        if target and self.stream and target != SINK_PREFIX + self.stream:
            return NOT_OWNER, f"this sink serves {self.stream!r}, not {brief(target)}"
        sender = batch.sender
        if sender.interval.computation and not any_valid_epoch(
            sender.interval.computation, sender.interval.index, sender.epoch
        ):
            # Sinks dedup by record id and keep no epochs, so nothing is adopted either way;
            # an epoch no registry could grant is refused as a node refuses it.
            return UNKNOWN_SENDER_EPOCH, (
                f"sender epoch {sender.epoch} is beyond what any registry grants"
            )
        return None

    def _split(
        self, batch: delivery_pb2.DeliveryBatch, pending: set[bytes]
    ) -> tuple[delivery_pb2.DeliveryAck, list[record_pb2.Record]]:
        """The batch's ack and its records to write: an id already written, or in
        ``pending`` (the write in progress, which this call extends), is a duplicate."""
        ack = delivery_pb2.DeliveryAck(batch_seq=batch.batch_seq)
        fresh: list[record_pb2.Record] = []
        refusal = self._refusal(batch)
        if refusal is not None:
            reason, message = refusal
            for record in batch.records:
                ack.rejected.add(record_id=record.record_id, reason=reason, message=message)
            return ack, fresh
        valid = []
        for record in batch.records:
            problem = _record_problem(record)
            if problem is None:
                valid.append(record)
            else:
                ack.rejected.add(record_id=record.record_id, reason=MALFORMED_RECORD,
                                 message=problem)  # fmt: skip
        written = self._index.seen([record.record_id for record in valid])
        for record, seen in zip(valid, written, strict=True):
            rid = record.record_id
            if seen or rid in pending:
                ack.duplicate_ids.append(rid)
            else:
                pending.add(rid)
                fresh.append(record)
                ack.committed_ids.append(rid)
        self.duplicates += len(ack.duplicate_ids)
        return ack, fresh

    def _note_told(
        self,
        batches: Sequence[delivery_pb2.DeliveryBatch],
        acks: Sequence[delivery_pb2.DeliveryAck],
        *,
        written: bool,
    ) -> None:
        """Under the lock: mark the acks of batches whose sender progress is committed --
        with their records (``written``), or on its own for a batch without records (a
        retired sender's floor, noted here)."""
        told = []
        for batch, ack in zip(batches, acks, strict=True):
            mark = sender_progress(batch)
            if mark is None or ack.rejected or self._refusal(batch) is not None:
                continue
            if not batch.records:
                told.append(mark)
            ack.progress_noted = bool(written or not batch.records)
        if told:
            self._index.note_progress(told)

    def wait_beyond(self, position: int, timeout_s: float) -> bool:
        """Block until a record exists at ``position`` (True) or the timeout (False)."""
        with self._grew:
            return self._grew.wait_for(lambda: len(self) > position, timeout_s)

    def latest(self, key: bytes) -> tuple[int, record_pb2.Record] | None:
        """The latest record with ``key`` and its position (the materialized view)."""
        with self._lock:
            position = self._index.latest(key)
        if position is None:
            return None
        return self.read(position, 1)[0]
