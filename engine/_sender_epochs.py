"""``SenderEpochs``: the newest epoch seen from each sending interval, to fence zombies.

A delivery from ``(computation, interval)`` at an epoch older than one already
seen from it comes from a zombie and is refused. A newer epoch is remembered
durably: it is written (store metadata ``sender-epoch/<computation>/<interval>``)
in the receiver's next commit, so a restart does not forget it.
"""

from __future__ import annotations

import struct

from millrace.statestore import StateStore, Transaction

SENDER_EPOCH_PREFIX = "sender-epoch/"
"""Store metadata of the newest epoch seen from a sending interval (u64), by name."""
_U64 = struct.Struct(">Q")


class SenderEpochs:
    """Per receiving interval; driven by the interval's one thread."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._known: dict[str, int] = {}
        self._unsaved: dict[str, int] = {}

    def accept(self, computation: str, interval: int, epoch: int) -> bool:
        """False when ``(computation, interval)`` has already been seen at a newer epoch."""
        name = f"{SENDER_EPOCH_PREFIX}{computation}/{interval}"
        known = self._known.get(name)
        if known is None:
            raw = self._store.get_meta(name)
            known = _U64.unpack(raw)[0] if raw else 0
            self._known[name] = known
        if epoch < known:
            return False
        if epoch > known:
            self._known[name] = epoch
            self._unsaved[name] = epoch
        return True

    def stage(self, txn: Transaction) -> None:
        """Put the epochs learnt since the last commit in ``txn``."""
        for name, epoch in self._unsaved.items():
            txn.set_meta(name, _U64.pack(epoch))

    def committed(self) -> None:
        """The transaction :meth:`stage` filled is committed."""
        self._unsaved.clear()
