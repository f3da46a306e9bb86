"""The layout of the state column family, and the upgrade of a store written before it.

User state lives under ``hash(key) | len(key) | key | tag`` (:func:`state_key`), so a
range of the 64-bit key-hash space -- a key interval, or either half of one being
split -- is one range of store keys; the engine's own entries under
:data:`RESERVED_PREFIX`, after every user key. A store written before keys were
hashed (``len(key) | key | tag``, engine entries under four 0xff bytes) is rewritten
once, in one commit, when an interval opens it.
"""

from __future__ import annotations

import struct

from millrace.engine._scope import RESERVED_PREFIX, state_prefix
from millrace.statestore import StateStore

LAYOUT_META = "engine/state-layout"
"""The store metadata that names the layout its state is written in."""
HASHED_KEYS = b"key-hash/1"

_U32 = struct.Struct(">I")
_OLD_RESERVED = b"\xff\xff\xff\xff"


def ensure_state_layout(store: StateStore, epoch: int) -> None:
    """Mark a new store as written in today's layout; rewrite an older store's state
    into it (one commit at ``epoch``: a crash leaves the old store, rewritten again)."""
    found = store.get_meta(LAYOUT_META)
    if found == HASHED_KEYS:
        return
    if found is not None:
        raise ValueError(
            f"{store.description}: state written in layout {found!r}, which this version "
            f"of Millrace does not read (it writes {HASHED_KEYS!r})"
        )
    txn = store.begin(epoch)
    for old_key, value in list(store.scan_state_range(b"", None)):
        txn.delete(old_key)
        txn.put(_hashed(old_key), value)
    txn.set_meta(LAYOUT_META, HASHED_KEYS)
    txn.commit(sync=True)


def _hashed(old_key: bytes) -> bytes:
    """An entry's key in today's layout, from its key in the layout before hashing."""
    if old_key.startswith(_OLD_RESERVED):
        return RESERVED_PREFIX + old_key[len(_OLD_RESERVED) :]
    (length,) = _U32.unpack_from(old_key)
    user_key = old_key[4 : 4 + length]
    return state_prefix(user_key) + old_key[4 + length :]
