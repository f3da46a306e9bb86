"""Dead letters: records and timer fires that failed for good, with why, in the state store.

Each is an ``admin_pb2.DeadLetter`` under a reserved state key (user state keys
start with a key length, never with the reserved prefix), written in the same
commit that gives up on the record, so it is never lost or written twice. A letter
goes once it is older than the computation's ``dead_letter_retention_ms``
(:func:`expired_letters`, swept by the interval's worker).
"""

from __future__ import annotations

from millrace.engine._scope import RESERVED_PREFIX
from millrace.statestore import StateStore, Transaction
from millrace.wire.v1 import admin_pb2, record_pb2

DEAD_LETTER_PREFIX = RESERVED_PREFIX + b"dead-letter/"


def stage_letter(  # noqa: PLR0917 - a letter has this many parts
    txn: Transaction,
    computation: str,
    ident: bytes,
    record: record_pb2.Record,
    error: str,
    attempts: int,
    failed_at_ms: int,
) -> None:
    """Stage in ``txn`` the dead letter of ``record`` (``ident``: a record or timer id)."""
    letter = admin_pb2.DeadLetter(
        computation=computation, error=error, attempts=attempts, failed_at_ms=failed_at_ms
    )
    letter.record.CopyFrom(record)
    txn.put(DEAD_LETTER_PREFIX + ident, letter.SerializeToString())


def read_letters(store: StateStore) -> list[admin_pb2.DeadLetter]:
    """Every dead letter of ``store``, in key order."""
    letters = []
    for _, raw in store.scan_state(DEAD_LETTER_PREFIX):
        letter = admin_pb2.DeadLetter()
        letter.ParseFromString(raw)
        letters.append(letter)
    return letters


def expired_letters(store: StateStore, failed_before_ms: int) -> list[bytes]:
    """The state keys of the dead letters that failed before ``failed_before_ms``."""
    expired = []
    for key, raw in store.scan_state(DEAD_LETTER_PREFIX):
        letter = admin_pb2.DeadLetter()
        letter.ParseFromString(raw)
        if letter.failed_at_ms < failed_before_ms:
            expired.append(key)
    return expired
