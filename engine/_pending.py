"""What a batch hook's bulk calls changed for keys that have no scope (yet).

``BatchContext.write_states`` and ``set_timers`` run per (key, window) of a whole batch;
their changes are kept flat, in the order made, and written into the transaction in one
pass when the call is applied. They are indexed per key only when a key's changes are
asked for (a key's scope made after them, a read of what the call wrote): the usual
batch never asks.
"""

from __future__ import annotations

from collections.abc import KeysView
from collections.abc import Set as AbstractSet
from typing import Any, Generic, TypeVar

I = TypeVar("I")  # noqa: E741  # what of a key changed: a state's tag, a timer's (domain, tag)
V = TypeVar("V")


class PendingChanges(Generic[I, V]):
    """Changes ``(key, item, value)`` in the order made: a later change of a key's item
    wins. A key's changes leave when they move into its scope (:meth:`take`)."""

    __slots__ = ("_index", "_moved", "items", "keys", "values")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.items: list[I] = []
        self.values: list[V] = []
        self._index: dict[bytes, dict[I, V]] | None = None
        self._moved: set[bytes] = set()
        """Keys whose changes moved into their scopes: what they left here is dropped."""

    def __bool__(self) -> bool:
        return bool(self.keys)

    def extend(self, keys: list[bytes], items: list[I], values: list[V]) -> None:
        """Add changes (lists of one length, taken as they are)."""
        self.keys += keys
        self.items += items
        self.values += values
        self._index = None

    def of(self, key: bytes) -> dict[I, V] | None:
        """``key``'s changes (item -> value), or None."""
        return self._by_key().get(key)

    def changed_keys(self) -> KeysView[bytes]:
        """The keys with changes here."""
        return self._by_key().keys()

    def take(self, key: bytes) -> dict[I, V]:
        """``key``'s changes, which leave (they move into its scope)."""
        own = self._by_key().pop(key, None)
        if own is None:
            return {}
        self._moved.add(key)
        return own

    def entries(self, skip: AbstractSet[bytes]) -> tuple[list[bytes], list[I], list[V]]:
        """The changes, in order, but those of the keys ``skip`` and of moved keys."""
        gone = self._moved | skip if self._moved else skip
        if not gone:
            return self.keys, self.items, self.values
        kept = [i for i, key in enumerate(self.keys) if key not in gone]
        items, values = self.items, self.values
        return [self.keys[i] for i in kept], [items[i] for i in kept], [values[i] for i in kept]

    def _by_key(self) -> dict[bytes, dict[I, V]]:
        index = self._index
        if index is None:
            index = self._index = {}
            moved = self._moved
            for key, item, value in zip(self.keys, self.items, self.values, strict=True):
                if key not in moved:
                    _keep(index, key, item, value)
        return index


def _keep(book: dict[bytes, dict[Any, Any]], key: bytes, item: Any, value: Any) -> None:
    """``book[key][item] = value``, making ``key``'s entry when it has none."""
    if (own := book.get(key)) is None:
        book[key] = {item: value}
    else:
        own[item] = value
