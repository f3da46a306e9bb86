"""The state store's error tree.

Every error says what happened and what the operator can do about it.
``retryable`` tells callers whether trying the same operation again can
succeed without a change elsewhere (servicers map it to a gRPC status).
"""

from __future__ import annotations

from typing import ClassVar


class StateStoreError(Exception):
    """Base class of every error raised by ``statestore``."""

    retryable: ClassVar[bool] = False


class StoreLockedError(StateStoreError):
    """Another process (or another handle in this one) has the store open.

    RocksDB allows one writer per directory. Stop the other process that uses
    this data directory, or give this process a directory of its own.
    """

    retryable = True

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"state store {path!r} is locked by another process or handle ({detail}); "
            "stop the other process using this data directory or point this one elsewhere"
        )
        self.path = path


class StoreCorruptedError(StateStoreError):
    """RocksDB reported corruption; the directory cannot be opened as is.

    Restore the interval from a backup or delete the directory and let the node
    rebuild it by replaying from its upstreams (its senders resend unacked work).
    """

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"state store {path!r} is corrupted: {detail}")
        self.path = path


class IncompatibleStoreError(StateStoreError):
    """The directory was written by an incompatible store format.

    Open it with the Millrace version that wrote it, or migrate it.
    """

    def __init__(self, path: str, found: str, expected: str) -> None:
        super().__init__(
            f"state store {path!r} has format {found!r}, this version reads {expected!r}"
        )
        self.path = path


class EpochFencedError(StateStoreError):
    """A commit or claim carried an epoch older than the store's owner epoch.

    The key interval has moved to a newer owner; this process is a zombie for
    that interval and must stop writing to it. Nothing from the rejected
    operation was written.
    """

    def __init__(self, epoch: int, owner_epoch: int) -> None:
        super().__init__(
            f"epoch {epoch} is fenced: the store is owned by epoch {owner_epoch}; "
            "this process lost the key interval and must not write to it"
        )
        self.epoch = epoch
        self.owner_epoch = owner_epoch


class TransactionStateError(StateStoreError):
    """A transaction was used after it committed or failed.

    Begin a new transaction; a failed one can never be committed.
    """


class StoreClosedError(StateStoreError):
    """The store was closed; reopen it to continue."""


class StoreWriteError(StateStoreError):
    """The storage engine refused a write (disk full, I/O error).

    Nothing from the transaction was applied. Fix the disk and retry.
    """

    retryable = True
