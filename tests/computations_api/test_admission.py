"""Admission's C-level path (a batch of new records of one stream keyed by their own
key, its shape read natively, or by a JSON field read natively a batch at a time)
admits exactly what its record-by-record loop admits, for any batch."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from millrace.computations import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, intervals_of
from millrace.computations._keys import interval_of, load_key_extractor
from millrace.engine._keying import RecordKeying
from millrace.engine._outcome import BatchOutcome
from millrace.engine._received import Received
from millrace.statestore import StateStore
from millrace.wire.v1 import record_pb2

STREAMS = ("events", "other")

record_fields = st.tuples(
    st.sampled_from([b"", b"id-1", b"id-2", b"id-3", b"id-4", b"id-5", b"id-6"]),
    st.binary(max_size=4),
    st.binary(max_size=4),
    st.sampled_from(
        [0, 1, MIN_EVENT_TIME_MS - 1, MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS, MAX_EVENT_TIME_MS + 1]
    ),
    st.sampled_from((*STREAMS, "unread")),
)


def _keying(intervals: int, interval: int, *, plain: bool) -> RecordKeying:
    def dead_letter(*args: Any) -> None:
        raise AssertionError("the 'key' extractor never fails")

    extractors = {stream: load_key_extractor("key") for stream in STREAMS}
    return RecordKeying(
        "agg", interval, intervals, extractors, dead_letter,
        keyed_as_sent=frozenset(STREAMS) if plain else frozenset(),
    )  # fmt: skip


def _received(keying: RecordKeying, records: list[record_pb2.Record]) -> Received:
    return Received.of_records(records, interval=keying._interval, intervals=keying._intervals)


def _admit(keying: RecordKeying, records: list[record_pb2.Record], seen: list[bytes]) -> Any:
    store = StateStore.open_memory()
    txn = store.begin()
    txn.mark_seen(seen)
    txn.commit()
    outcome = BatchOutcome()
    admitted, repeats = keying.admit(store.begin(), _received(keying, records), outcome)
    return (
        [(i, rid, key, tuple(user), type(user)) for i, rid, key, user in admitted],
        repeats,
        outcome.duplicates,
        outcome.rejected,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(record_fields, max_size=8),
    st.sets(st.sampled_from([b"id-1", b"id-2"])),
    st.sampled_from([(1, 0), (2, 0), (2, 1), (3, 2)]),
)
def test_the_c_level_path_admits_what_the_loop_admits(
    fields: list[tuple[bytes, bytes, bytes, int, str]],
    seen: set[bytes],
    layout: tuple[int, int],
) -> None:
    records = [
        record_pb2.Record(
            record_id=rid, key=key, value=value, event_time_ms=ts, stream=stream, producer="p"
        )
        for rid, key, value, ts, stream in fields
    ]
    intervals, interval = layout
    plain = _admit(_keying(intervals, interval, plain=True), records, sorted(seen))
    loop = _admit(_keying(intervals, interval, plain=False), records, sorted(seen))
    assert plain == loop


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=6), unique=True, max_size=30),
    st.sampled_from([(1, 0), (2, 0), (2, 1), (3, 2)]),
    st.data(),
)
def test_plain_batches_are_admitted_as_the_loop_admits_them(
    rids: list[bytes], layout: tuple[int, int], data: st.DataObject
) -> None:
    """Batches that take the C-level path where their keys all fall in the interval."""
    records = [
        record_pb2.Record(
            record_id=rid,
            key=data.draw(st.binary(max_size=3)),
            value=data.draw(st.binary(max_size=3)),
            event_time_ms=data.draw(st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS)),
            stream="events",
            producer="p",
        )
        for rid in rids
    ]
    intervals, interval = layout
    keying = _keying(intervals, interval, plain=True)
    if intervals == 1 and records:
        whole = keying._admit_whole(
            _received(keying, records), [False] * len(rids), [None] * len(rids)
        )
        assert whole is not None
    assert _admit(keying, records, []) == _admit(
        _keying(intervals, interval, plain=False), records, []
    )


def test_a_plain_batch_takes_the_c_level_path() -> None:
    records = [
        record_pb2.Record(record_id=b"r%d" % i, key=b"k%d" % i, value=b"1", stream="events")
        for i in range(50)
    ]
    keying = _keying(1, 0, plain=True)
    admitted = keying._admit_whole(
        _received(keying, records), [False] * len(records), [None] * len(records)
    )
    assert admitted is not None and [a[2] for a in admitted] == [r.key for r in records]


def _json_keying(intervals: int, interval: int, *, batched: bool) -> RecordKeying:
    """``json:k`` keying; ``batched`` False: the same extractor seen as a plain function
    (no batch reading), so every record goes through the loop, one by one."""

    def dead_letter(txn: Any, record: Any, error: str, attempts: int, outcome: Any) -> None:
        outcome.dead_lettered.append((record.record_id, error))

    json_key = load_key_extractor("json:k")

    def one_by_one(key: bytes, value: bytes) -> bytes:
        return json_key(key, value)

    extract = json_key if batched else one_by_one
    extractors = {stream: extract for stream in STREAMS}
    return RecordKeying("agg", interval, intervals, extractors, dead_letter)


json_values = st.sampled_from(
    [b'{"k": 1}', b'{"k": "a"}', b'{"k": 22, "x": [1]}', b'{"k": "\\u00e9"}', b'{"k": 1.5}',
     b"not json", b'{"x": 1}', b'{"k": [1]}', b'{"k": 1, "k": 2}', b'{"k": -7}']
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(record_fields, json_values), max_size=10),
    st.sets(st.sampled_from([b"id-1", b"id-2"])),
    st.sampled_from([(1, 0), (2, 0), (2, 1), (3, 2)]),
    st.booleans(),
)
def test_json_keys_read_in_batch_admit_what_the_loop_admits(
    fields: list[tuple[tuple[bytes, bytes, bytes, int, str], bytes]],
    seen: set[bytes],
    layout: tuple[int, int],
    one_stream: bool,
) -> None:
    records = [
        record_pb2.Record(
            record_id=rid, key=key, value=value, event_time_ms=ts,
            stream="events" if one_stream else stream, producer="p",
        )
        for (rid, key, _, ts, stream), value in fields
    ]  # fmt: skip
    intervals, interval = layout

    def admitted(batched: bool) -> Any:
        keying = _json_keying(intervals, interval, batched=batched)
        store = StateStore.open_memory()
        txn = store.begin()
        txn.mark_seen(sorted(seen))
        txn.commit()
        outcome = BatchOutcome()
        got, repeats = keying.admit(store.begin(), _received(keying, records), outcome)
        users = [(i, rid, key, tuple(user), type(user)) for i, rid, key, user in got]
        return users, repeats, outcome.duplicates, outcome.rejected, outcome.dead_lettered

    assert admitted(batched=True) == admitted(batched=False)


def test_a_json_keyed_batch_takes_the_c_level_path() -> None:
    records = [
        record_pb2.Record(record_id=b"r%d" % i, value=b'{"k": %d}' % i, stream="events")
        for i in range(50)
    ]
    keying = _json_keying(1, 0, batched=True)
    received = _received(keying, records)
    known = keying._batch_keys(received)
    admitted = keying._admit_whole(received, [False] * len(records), known)
    assert admitted is not None and [a[2] for a in admitted] == [b"%d" % i for i in range(50)]


def test_intervals_of_is_interval_of_per_key() -> None:
    keys = [b"", b"a", b"\xff" * 40] + [b"k%d" % i for i in range(200)]
    for count in (1, 2, 3, 7, 1 << 20):
        assert intervals_of(keys, count) == [interval_of(k, count) for k in keys]
