"""The first step of a batch: set aside what was already committed, key the rest.

Duplicates of committed records are settled here; a record without an id, of a
stream the computation does not read, with an event time out of range or of a
key another interval owns is rejected; one whose key cannot be extracted is
dead-lettered (through the processor's ``dead_letter``). What remains is
admitted: the new records with their ids and keys, in arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from operator import itemgetter
from typing import cast

from millrace.computations import (
    MAX_EVENT_TIME_MS,
    MIN_EVENT_TIME_MS,
    KeyExtractor,
    Record,
    RecordColumns,
    interval_of,
    intervals_of,
)
from millrace.engine._batch_keys import BatchKeys, batch_key_reader
from millrace.engine._outcome import BatchOutcome
from millrace.engine._received import Received
from millrace.engine._tuples import new_tuple
from millrace.event_time import event_time_problem
from millrace.statestore import Transaction
from millrace.wire.v1 import delivery_pb2, record_pb2

MALFORMED_RECORD = delivery_pb2.MALFORMED_RECORD
UNKNOWN_STREAM = delivery_pb2.UNKNOWN_STREAM
WRONG_INTERVAL = delivery_pb2.WRONG_INTERVAL

AdmittedItems = list[tuple[int, bytes, bytes, Record]]
"""New records of a batch: their positions in the :class:`Received` columns, ids, keys
and the :class:`computations.Record` user code gets, in arrival order."""


class AdmittedWhole:
    """A batch admitted whole (the usual one): its records as columns, handed to
    ``process_batch`` as they are, without a :class:`Record` made per record.
    Iterated, it gives the items of :data:`AdmittedItems` (records left to
    ``process_record``)."""

    __slots__ = ("records",)

    def __init__(self, records: RecordColumns) -> None:
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[tuple[int, bytes, bytes, Record]]:
        records = self.records
        return zip(range(len(records)), records.record_ids, records.keys, records, strict=True)


Admitted = AdmittedItems | AdmittedWhole
"""A batch's new records: as items, or whole."""


def admitted_keys_ids(admitted: Admitted) -> tuple[Iterable[bytes], Iterable[bytes]]:
    """The keys and the ids of the admitted records, in arrival order."""
    if isinstance(admitted, AdmittedWhole):
        return admitted.records.keys, admitted.records.record_ids
    return map(itemgetter(2), admitted), map(itemgetter(1), admitted)


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
        self._many: dict[str, BatchKeys] = {
            stream: many
            for stream, extract in extractors.items()
            if (many := batch_key_reader(extract)) is not None
        }
        """The extractors that key a batch's values at once (``json:FIELD``, natively)."""
        self._dead_letter = dead_letter
        self._keyed_as_sent = keyed_as_sent

    def admit(
        self,
        txn: Transaction,
        received: Received,
        outcome: BatchOutcome,
        *,
        remembered: bool = True,
    ) -> tuple[Admitted, list[bytes]]:
        """The new records with their keys; and the ids of repeated copies within the
        batch (duplicates if their first copy commits, else retried with it).
        ``remembered`` False: the store keeps no ids (an ephemeral run), none is looked up."""
        rids = received.ids
        seen = txn.seen(rids) if remembered else [False] * len(rids)
        known = self._batch_keys(received)
        whole = self._admit_whole(received, seen, known)
        if whole is not None:
            return whole, []
        in_batch: set[bytes] = set()
        admitted: AdmittedItems = []
        repeats: list[bytes] = []
        streams, times, producers = received.streams, received.times, received.producers
        for i, (rid, duplicate) in enumerate(zip(rids, seen, strict=True)):
            if duplicate:
                outcome.duplicates.append(rid)
                continue
            if rid in in_batch:
                repeats.append(rid)
                continue
            key = self._key_of(txn, received, i, outcome, known[i])
            if key is None:
                continue
            in_batch.add(rid)
            fields = (streams[i], key, received.values[i], times[i], rid, producers[i])
            admitted.append((i, rid, key, new_tuple(Record, fields)))
        return admitted, repeats

    def _admit_whole(
        self, received: Received, seen: list[bool], known: list[bytes | None]
    ) -> AdmittedWhole | None:
        """The usual batch -- new records with distinct ids, all of one stream keyed by its
        own key or read a batch at a time (``known``, every one keyed), event times in
        range, keys of this interval -- admitted in C-level passes, exactly as the loop
        of :meth:`admit` would; None for any other batch."""
        count, shape = len(received), received.shape
        if not count or not shape.ids_distinct or not shape.one_stream or any(seen):
            return None
        if shape.min_event_ms < MIN_EVENT_TIME_MS or shape.max_event_ms > MAX_EVENT_TIME_MS:
            return None
        rids = received.ids
        keys: list[bytes]
        if received.streams[0] in self._keyed_as_sent:
            if shape.keys_in_interval != count:
                return None
            keys = received.keys
        elif received.streams[0] in self._many and None not in known and all(rids):
            keys = cast(list[bytes], known)  # no None in it
            intervals = self._intervals
            if intervals > 1 and intervals_of(keys, intervals).count(self._interval) != count:
                return None
        else:
            return None
        records = RecordColumns(
            streams=received.streams, keys=keys, values=received.values, times=received.times,
            record_ids=rids, producers=received.producers,
        )  # fmt: skip
        return AdmittedWhole(records)

    def _batch_keys(self, received: Received) -> list[bytes | None]:
        """The keys of the batch's records that their streams' extractors read a batch
        at a time, by position; None where a record is keyed on its own."""
        streams, values = received.streams, received.values
        known: list[bytes | None] = [None] * len(streams)
        if not self._many or not streams:
            return known
        if received.shape.one_stream:
            many = self._many.get(streams[0])
            return known if many is None else many(values)
        for stream, many in self._many.items():
            at = [i for i, s in enumerate(streams) if s == stream]
            if at:
                for i, key in zip(at, many([values[i] for i in at]), strict=True):
                    known[i] = key
        return known

    def _key_of(
        self,
        txn: Transaction,
        received: Received,
        i: int,
        outcome: BatchOutcome,
        known: bytes | None = None,
    ) -> bytes | None:
        """Record ``i``'s key for this computation (``known``: as read with its batch),
        or None after rejecting or dead-lettering it."""
        rid, stream, time_ms = received.ids[i], received.streams[i], received.times[i]
        extract = self._extract.get(stream)
        if not rid:
            outcome.rejected.append((rid, MALFORMED_RECORD, "record has no record_id"))
            return None
        if extract is None:
            message = f"computation {self._name!r} does not read stream {stream!r}"
            outcome.rejected.append((rid, UNKNOWN_STREAM, message))
            return None
        if not MIN_EVENT_TIME_MS <= time_ms <= MAX_EVENT_TIME_MS:
            problem = event_time_problem(time_ms)
            outcome.rejected.append((rid, MALFORMED_RECORD, f"record {rid!r}: {problem}"))
            return None
        try:
            key = known if known is not None else extract(received.keys[i], received.values[i])
        except Exception as exc:
            # The payload can never be keyed: keep it, with the reason, for the operator.
            record = received.wire_record(i)
            self._dead_letter(txn, record, f"key extraction failed: {exc!r}", 1, outcome)
            return None
        intervals = self._intervals
        if intervals > 1 and interval_of(key, intervals) != self._interval:
            message = f"key {key!r} belongs to another interval of {self._name!r}"
            outcome.rejected.append((rid, WRONG_INTERVAL, message))
            return None
        return key
