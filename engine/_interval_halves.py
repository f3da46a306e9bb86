"""A split interval's store cut down to one half of its key range; two halves' stores
merged back into one.

An interval splits by copying its closed store once per half
(:func:`statestore.copy_store`) and cutting each copy down to its half here: the state
of the other half's keys goes with two RocksDB range deletions (state is laid out by
key hash, ``engine/_state_layout.py``), the other half's timers one by one (a store
holds far fewer timers than state entries), and what belongs to the interval as a
whole -- the productions still to send, the dead letters -- stays with the lower half
only, so that each is sent or kept once. Record ids stay in both: a record either half
already committed is a duplicate to both.

Two halves merge by copying the lower half's closed store and making the copy absorb
the upper half's (:func:`merge_into`): state and timers (their keys are disjoint),
record ids with their senders' progress (``StateStore.absorb``), the upper's
productions still to send (numbered after every frame either half numbered: senders'
positions never go back) and its metadata, each entry reconciled as its meaning
says.
"""

from __future__ import annotations

import struct

from millrace.computations import KeyInterval
from millrace.engine._dead_letters import DEAD_LETTER_PREFIX
from millrace.engine._frames import frame_key
from millrace.engine._outbox_ledger import NEXT_FRAME, next_frame
from millrace.engine._production_ids import (
    FIRED_WATERMARK,
    decode_fired_watermark,
    encode_fired_watermark,
)
from millrace.engine._retired_senders import (
    RETIRED_SENDERS,
    RetiredSenders,
    retired_senders,
)
from millrace.engine._scope import RESERVED_PREFIX
from millrace.engine._sender_epochs import SENDER_EPOCH_PREFIX
from millrace.statestore import StateStore, prefix_end
from millrace.statestore.types import TimeDomain

_U64 = struct.Struct(">Q")


def keeps_whole_interval_entries(half: KeyInterval) -> bool:
    """Whether ``half`` is the lower half: the one that keeps the outbox and the
    dead letters of the interval it was split from."""
    return half.index % 2 == 0


def cut_to_half(store: StateStore, half: KeyInterval, epoch: int, *, split: int) -> None:
    """Drop from ``store`` (a copy of the store of interval ``split``, which ``half``
    was split from; it may be opened without its record ids) what ``half`` does not
    hold, in one write under ``epoch``. The lower half answers for ``split``'s name
    as a sender from then on (``engine/_retired_senders.py``)."""
    ranges = []
    if half.start:
        ranges.append((b"", _U64.pack(half.start)))
    if half.index + 1 < half.count:  # not the last share: keys hash past its end
        ranges.append((_U64.pack(half.end), RESERVED_PREFIX))
    lower = keeps_whole_interval_entries(half)
    if not lower:
        end = prefix_end(DEAD_LETTER_PREFIX)
        assert end is not None
        ranges.append((DEAD_LETTER_PREFIX, end))
    timers = [
        (domain, timer.key, timer.tag)
        for domain in TimeDomain
        for timer in store.due_timers(domain, None)
        if not half.holds(timer.key)
    ]
    outbox = [] if lower else [key for key, _ in store.outbox()]
    meta: dict[str, bytes | None] = {RETIRED_SENDERS: None}  # the upper half sends nothing old
    if lower:
        after = next_frame(store)
        retired = RetiredSenders(after, {split: after} if after else {})
        meta[RETIRED_SENDERS] = retired_senders(store).joined(retired, through=after).encode()
    store.drop(epoch, state_ranges=ranges, timers=timers, outbox=outbox, meta=meta)


def merge_into(
    whole: StateStore, upper: StateStore, epoch: int, *, halves: tuple[int, int]
) -> None:
    """Make ``whole`` (a copy of the lower half's store) hold the upper half's too, under
    ``epoch``; ``halves``: the two halves' interval ids (lower, upper), whose names the
    whole answers for as a sender from then on. Not atomic as a whole: merge into a
    copy no one runs yet, and start from a new copy if it is interrupted."""
    whole.absorb(upper, epoch)
    frames = list(upper.outbox())
    ends = next_frame(whole), next_frame(upper)
    first = max(ends)
    after = first + len(frames)
    txn = whole.begin(epoch)
    for offset, (_, payload) in enumerate(frames):
        txn.add_outbox(frame_key(first + offset), payload)
    txn.set_meta(NEXT_FRAME, _U64.pack(after))
    retired = RetiredSenders(after, {i: end for i, end in zip(halves, ends, strict=True) if end})
    answered = retired_senders(whole).joined(retired_senders(upper), through=after)
    txn.set_meta(RETIRED_SENDERS, answered.joined(retired, through=after).encode())
    mine = whole.metadata()
    for name, theirs in upper.metadata().items():
        ours = mine.get(name)
        if name in (NEXT_FRAME, RETIRED_SENDERS) or theirs == ours:
            continue
        if ours is None:
            txn.set_meta(name, theirs)
        elif name == FIRED_WATERMARK:
            fired = max(decode_fired_watermark(ours) or 0, decode_fired_watermark(theirs) or 0)
            txn.set_meta(name, encode_fired_watermark(fired))
        elif name.startswith(SENDER_EPOCH_PREFIX):
            txn.set_meta(name, max(ours, theirs))  # u64 big-endian: bytes order as numbers
        else:
            raise ValueError(f"cannot merge metadata {name!r} of two halves: {ours!r}, {theirs!r}")
    txn.commit(sync=True)
