"""Replay corrections without Spark: what the online sink holds against what the log
says, and the records that make them agree.

An output's *identity* is what a sink's reader keeps one current result for:
``(key, window start, window end)`` for a windowed result (a ``dataflow`` pane,
format version 1), else its key. Its *result* is the pane's ``value`` (the
latest pane that is not a retraction: by pane index in the backfill, in arrival
order in the sink), or the record's value (the latest: in production order in the
backfill, in arrival order in the sink). A correction is the backfill's record
for an identity whose result the sink lacks or holds differently, under a new
id derived from the backfill's id and value: publishing it twice is a duplicate
the sink drops, and a run after a successful one finds nothing to correct.

A stream whose records are each a result (a join's matches) has no current
result per key: :func:`compare_content` compares it record by record, by
content, not id.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc
from xxhash import xxh3_128_digest

from millrace.wire.v1 import delivery_pb2, delivery_pb2_grpc, record_pb2

REPLAY = "replay"
"""The producer name of corrections."""
PUBLISH_BATCH = 1000

Identity = tuple[bytes, int | None, int | None]


class Output(NamedTuple):
    """A sink record, as compared."""

    record_id: bytes
    key: bytes
    value: bytes
    event_time_ms: int
    seq: int = 0
    """A backfill output's place in production order (``OutputRow.seq``): of two
    results of one identity, the later produced is current."""


@dataclass(kw_only=True)
class StreamReport:
    """One sink stream's comparison."""

    checked: int = 0
    """Identities the backfill computed inside the time range."""
    changed: int = 0
    """... whose result the sink holds differently."""
    missing: int = 0
    """... the sink does not hold at all."""
    online_only: int = 0
    """Identities in the range the sink holds and the backfill does not (reported only)."""
    corrections: list[Output] = field(default_factory=list)

    def to_dict(self) -> dict[str, int]:
        """The figures, JSON-ready."""
        return {
            "checked": self.checked,
            "changed": self.changed,
            "missing": self.missing,
            "online_only": self.online_only,
            "corrections": len(self.corrections),
        }


def identify(output: Output) -> tuple[Identity, Any, int]:
    """``(identity, result, order)``: ``result`` None for a retraction; ``order`` the
    pane index (0 for a plain record)."""
    try:
        body = json.loads(output.value)
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and body.get("v") == 1 and "window" in body and "pane" in body:
        start, end = body["window"]
        result = None if body.get("retraction") else body.get("value")
        return (output.key, int(start), int(end)), result, int(body["pane"])
    return (output.key, None, None), output.value, 0


def in_range(
    identity: Identity, event_time_ms: int, from_ms: int | None, to_ms: int | None
) -> bool:
    """Whether an output belongs to ``[from_ms, to_ms)``: its whole window, or its time."""
    _, start, end = identity
    first, last = (
        (start, end - 1) if start is not None and end is not None else (event_time_ms,) * 2
    )
    return (from_ms is None or first >= from_ms) and (to_ms is None or last < to_ms)


def compare(
    backfill: Iterable[Output],
    online: Iterable[Output],
    *,
    from_ms: int | None = None,
    to_ms: int | None = None,
) -> StreamReport:
    """Corrections that make ``online`` (in the sink's arrival order) hold the
    backfill's current result for every identity in the range."""
    wanted: dict[Identity, tuple[int, int, int, bytes, Any, Output]] = {}
    for output in backfill:
        ident, result, order = identify(output)
        if result is None or not in_range(ident, output.event_time_ms, from_ms, to_ms):
            continue
        rank = (order, output.seq, output.event_time_ms, output.record_id)
        current = wanted.get(ident)
        if current is None or rank > current[:4]:
            wanted[ident] = (*rank, result, output)
    held: dict[Identity, Any] = {}
    for output in online:
        ident, result, _ = identify(output)
        if result is not None and in_range(ident, output.event_time_ms, from_ms, to_ms):
            held[ident] = result
    report = StreamReport(checked=len(wanted))
    report.online_only = sum(1 for ident in held if ident not in wanted)
    for ident, (*_, result, output) in sorted(wanted.items(), key=lambda item: item[1][:4]):
        if ident not in held:
            report.missing += 1
        elif held[ident] == result:
            continue
        else:
            report.changed += 1
        report.corrections.append(output._replace(record_id=correction_id(output)))
    return report


def compare_content(
    backfill: Iterable[Output],
    online: Iterable[Output],
    *,
    from_ms: int | None = None,
    to_ms: int | None = None,
) -> StreamReport:
    """Corrections for a stream whose every record is a result (a join's matches, an
    alert per event), not an update of one current result per identity: each
    backfill record whose content (key, value, event time) the sink does not hold
    as often as the backfill has it. Ids are not compared: where the online run's
    arrival order named them, they differ while the results agree."""
    wanted: Counter[tuple[bytes, bytes, int]] = Counter()
    firsts: dict[tuple[bytes, bytes, int], list[Output]] = {}
    for output in backfill:
        if in_range((output.key, None, None), output.event_time_ms, from_ms, to_ms):
            content = (output.key, output.value, output.event_time_ms)
            wanted[content] += 1
            firsts.setdefault(content, []).append(output)
    held: Counter[tuple[bytes, bytes, int]] = Counter(
        (o.key, o.value, o.event_time_ms)
        for o in online
        if in_range((o.key, None, None), o.event_time_ms, from_ms, to_ms)
    )
    report = StreamReport(checked=sum(wanted.values()))
    report.online_only = sum((held - wanted).values())
    for content, count in wanted.items():
        lacking = count - held.get(content, 0)
        if lacking > 0:
            report.missing += lacking
            outputs = sorted(firsts[content], key=lambda o: (o.seq, o.record_id))
            report.corrections.extend(
                o._replace(record_id=correction_id(o)) for o in outputs[count - lacking :]
            )
    return report


def correction_id(output: Output) -> bytes:
    """The id of the correction publishing ``output`` (a backfill record)."""
    return xxh3_128_digest(b"millrace-replay\x00" + output.record_id + output.value)


def publish(channel: grpc.Channel, stream: str, corrections: Sequence[Output]) -> int:
    """Deliver ``corrections`` to the sink of ``stream`` over ``channel``, in batches;
    returns how many it newly committed (duplicates of an earlier run are not counted).
    Raises ``RuntimeError`` if the sink rejects a record or keeps not taking it."""
    stub = delivery_pb2_grpc.DeliveryStub(channel)
    committed = 0
    for at in range(0, len(corrections), PUBLISH_BATCH):
        pending = list(corrections[at : at + PUBLISH_BATCH])
        for attempt in range(10):
            batch = delivery_pb2.DeliveryBatch(
                batch_seq=at + attempt + 1,
                target=record_pb2.KeyInterval(computation=f"sink:{stream}", index=0),
            )
            batch.sender.sender_id = REPLAY
            batch.records.extend(
                record_pb2.Record(
                    record_id=c.record_id, key=c.key, value=c.value,
                    event_time_ms=c.event_time_ms, producer=REPLAY, stream=stream,
                )
                for c in pending
            )  # fmt: skip
            acks = list(stub.Deliver(iter([batch]), timeout=60))
            done: set[bytes] = set()
            for ack in acks:
                if ack.rejected:
                    first = ack.rejected[0]
                    raise RuntimeError(f"sink {stream!r} rejected a correction: {first.message}")
                committed += len(ack.committed_ids)
                done.update(ack.committed_ids)
                done.update(ack.duplicate_ids)
            pending = [c for c in pending if c.record_id not in done]
            if not pending:
                break
            time.sleep(0.2 * (attempt + 1))
        else:
            raise RuntimeError(f"sink {stream!r} did not take {len(pending)} correction(s)")
    return committed
