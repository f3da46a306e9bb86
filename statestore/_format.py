"""What opening a store checks and brings up to date of its on-disk format.

The format version and the Bloom hash's seed live in META; a store of an older
format this version reads is upgraded in place, one of another is refused. Entries
earlier versions wrote that nothing reads any more are dropped here too.
"""

from __future__ import annotations

import secrets
import struct

from millrace.statestore import _keys
from millrace.statestore._engine import Column, Engine
from millrace.statestore.errors import IncompatibleStoreError

FORMAT_VERSION = b"3"
"""3: a timer's index entry holds its cause after its time. 2: outbox frames only, the
dedup clock and senders' progress in META; a store of format 2 is read as one of format
3 whose timers have no cause, and marked 3 when opened (older versions then refuse it
with IncompatibleStoreError, as they would misread a cause). A store of format 1, from
before the first release, is refused."""
_UPGRADED_FORMATS = (b"2",)
_FORMAT = _keys.reserved_meta_key("format")
_BLOOM_SEED = _keys.reserved_meta_key("bloom-seed")
_U64 = struct.Struct(">Q")


def check_format_and_seed(engine: Engine) -> int:
    """Refuse a store of another format; return the seed of its Bloom hash. A new
    store gets its format and a random seed (kept, so filters rebuilt on open are bit
    for bit the ones that were lost), a store made before seeds existed its seed: in
    one synced write."""
    batch = None
    found = engine.get(Column.META, _FORMAT)
    if found is None or found in _UPGRADED_FORMATS:
        batch = engine.new_batch()
        batch.put(Column.META, _FORMAT, FORMAT_VERSION)
    elif found != FORMAT_VERSION:
        raise IncompatibleStoreError(
            engine.description, found.decode(errors="replace"), FORMAT_VERSION.decode()
        )
    stored = engine.get(Column.META, _BLOOM_SEED)
    if stored is not None:
        seed = int(_U64.unpack(stored)[0])
    else:
        seed = secrets.randbits(64)
        batch = batch or engine.new_batch()
        batch.put(Column.META, _BLOOM_SEED, _U64.pack(seed))
    if batch is not None:
        engine.write(batch, sync=True)
    return seed


def drop_legacy_timer_entries(engine: Engine) -> None:
    """Range-delete the time-ordered timer entries earlier versions wrote beside each
    index entry: nothing reads them, and no commit would ever delete them now. One
    synced write, only when some are there."""
    start = _keys.LEGACY_TIMER_ORDER
    end = _keys.prefix_end(start)
    assert end is not None  # a one-byte prefix below 0xff
    if next(iter(engine.scan(Column.TIMERS, start, end)), None) is None:
        return
    batch = engine.new_batch()
    batch.delete_range(Column.TIMERS, start, end)
    engine.write(batch, sync=True)
