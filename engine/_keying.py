"""The first step of a batch: set aside what was already committed, key the rest.

Duplicates of committed records are settled here; a record without an id, of a
stream the computation does not read, with an event time out of range or of a
key another interval owns is rejected; one whose key cannot be extracted is
dead-lettered (through the processor's ``dead_letter``). What remains is
admitted: the new records with their ids and keys, in arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import repeat
from operator import attrgetter

from computations import (
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    KeyExtractor,
    Record,
    interval_of,
    intervals_of,
)
from engine._outcome import BatchOutcome
from engine._tuples import new_tuple
from engine._watermarks import event_time_problem
from millrace.wire.v1 import delivery_pb2, record_pb2
from statestore import Transaction

MALFORMED_RECORD = delivery_pb2.MALFORMED_RECORD
UNKNOWN_STREAM = delivery_pb2.UNKNOWN_STREAM
WRONG_INTERVAL = delivery_pb2.WRONG_INTERVAL

Admitted = list[tuple[record_pb2.Record, bytes, bytes, Record]]
"""New records of a batch with their ids, keys and the :class:`computations.Record`
user code gets, in arrival order."""

_RECORD_ID = attrgetter("record_id")
_FIELDS = attrgetter("stream", "key", "value", "event_time_ms", "producer")

DeadLetter = Callable[[Transaction, record_pb2.Record, str, int, BatchOutcome], None]
"""``(txn, record, error, attempts, outcome)``: keep a record that can never succeed."""


class RecordKeying:
    """Admits the records of one computation's interval."""

    def __init__(
        self,
        computation: str,
        interval: int,
        intervals: int,
        extractors: Mapping[str, KeyExtractor],
        dead_letter: DeadLetter,
        *,
        keyed_as_sent: AbstractSet[str] = frozenset(),
    ) -> None:
        """``keyed_as_sent``: the streams whose records are keyed by their own key (the
        ``key`` extractor)."""
        self._name = computation
        self._interval = interval
        self._intervals = intervals
        self._extract = extractors
        self._dead_letter = dead_letter
        self._keyed_as_sent = keyed_as_sent

    def admit(
        self, txn: Transaction, records: Sequence[record_pb2.Record], outcome: BatchOutcome
    ) -> tuple[Admitted, list[bytes]]:
        """The new records with their keys; and the ids of repeated copies within the
        batch (duplicates if their first copy commits, else retried with it)."""
        rids = list(map(_RECORD_ID, records))
        seen = txn.seen(rids)
        plain = self._admit_plain(records, rids, seen)
        if plain is not None:
            return plain, []
        in_batch: set[bytes] = set()
        admitted: Admitted = []
        repeats: list[bytes] = []
        for record, rid, duplicate in zip(records, rids, seen, strict=True):
            if duplicate:
                outcome.duplicates.append(rid)
                continue
            if rid in in_batch:
                repeats.append(rid)
                continue
            key = self._key_of(txn, record, outcome)
            if key is None:
                continue
            in_batch.add(rid)
            fields = (record.stream, key, record.value, record.event_time_ms, rid, record.producer)
            admitted.append((record, rid, key, new_tuple(Record, fields)))
        return admitted, repeats

    def _admit_plain(
        self, records: Sequence[record_pb2.Record], rids: list[bytes], seen: list[bool]
    ) -> Admitted | None:
        """The usual batch -- new records with distinct ids, all of one stream keyed by its
        own key, event times in range, keys of this interval -- admitted in C-level
        passes, exactly as the loop of :meth:`admit` would; None for any other batch."""
        count = len(records)
        if not count or any(seen) or not all(rids) or len(set(rids)) != count:
            return None
        streams, keys, values, times, producers = zip(*map(_FIELDS, records), strict=True)
        stream = streams[0]
        if stream not in self._keyed_as_sent or streams.count(stream) != count:
            return None
        if min(times) < MIN_EVENT_TIME_MS or max(times) > MAX_EVENT_TIME_MS:
            return None
        intervals = self._intervals
        if intervals > 1 and intervals_of(keys, intervals).count(self._interval) != count:
            return None
        fields = zip(streams, keys, values, times, rids, producers, strict=True)
        users = map(new_tuple, repeat(Record, count), fields)
        return list(zip(records, rids, keys, users, strict=True))

    def _key_of(
        self, txn: Transaction, record: record_pb2.Record, outcome: BatchOutcome
    ) -> bytes | None:
        """The record's key for this computation, or None after rejecting/dead-lettering it."""
        rid = record.record_id
        extract = self._extract.get(record.stream)
        if not rid:
            outcome.rejected.append((rid, MALFORMED_RECORD, "record has no record_id"))
            return None
        if extract is None:
            message = f"computation {self._name!r} does not read stream {record.stream!r}"
            outcome.rejected.append((rid, UNKNOWN_STREAM, message))
            return None
        if not MIN_EVENT_TIME_MS <= record.event_time_ms <= MAX_EVENT_TIME_MS:
            problem = event_time_problem(record.event_time_ms)
            outcome.rejected.append((rid, MALFORMED_RECORD, f"record {rid!r}: {problem}"))
            return None
        try:
            key = extract(record.key, record.value)
        except Exception as exc:
            # The payload can never be keyed: keep it, with the reason, for the operator.
            self._dead_letter(txn, record, f"key extraction failed: {exc!r}", 1, outcome)
            return None
        intervals = self._intervals
        if intervals > 1 and interval_of(key, intervals) != self._interval:
            message = f"key {key!r} belongs to another interval of {self._name!r}"
            outcome.rejected.append((rid, WRONG_INTERVAL, message))
            return None
        return key
