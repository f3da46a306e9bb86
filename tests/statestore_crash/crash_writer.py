"""Crash-test writer: commits numbered transactions to a RocksDB state store, forever.

Run as ``python tests/statestore_crash/crash_writer.py STORE_DIR``. ``test_statestore_crash.py``
starts it, SIGKILLs it at a random instant and checks what the store kept.

The writer opens the store with ``sync=True`` and resumes after the newest
committed transaction, whose number it finds in its own metadata entry
``last``. Transaction ``i`` touches every column family in one commit:

- state: ``s:{i}`` = :func:`state_value`, the overwritten counter ``count`` = i,
  and :data:`EXTRA_KEYS` keys ``x:{i}:{j}`` (they make the write batch big
  enough that a kill can land while RocksDB is writing it);
- dedup: ``mark_seen([rid(i)])``;
- timers: sets the event-time timer ``k:{i}`` at time ``i`` and deletes
  ``k:{i-1}``, so after transaction ``i`` exactly one timer is left;
- outbox: adds production ``p:{i}`` and removes ``p:{i-2}``, so after
  transaction ``i`` the outbox holds ``p:{i-1}`` and ``p:{i}``;
- metadata: ``last`` = i.

Before committing it also asks ``seen([rid(i-1), rid(i)])`` and requires
``[True, False]``: a writer restarted after a kill must still know, through
its rebuilt Bloom filters, the id of the transaction before it, and must not
claim the next one. On a mismatch it reports on stderr and exits with
:data:`EXIT_DEDUP_LOST`.

Stdout protocol, one flushed line per event:

- ``begin {i}``: ``commit()`` of transaction ``i`` is about to be called;
- ``committed {i}``: ``commit()`` of transaction ``i`` returned.

A kill between the two lines landed inside ``commit()``.

Imported as ``tests.crash_writer`` it provides the helpers the test uses to
predict what each transaction wrote.
"""

from __future__ import annotations

import hashlib
import sys

from millrace.statestore import StateStore, StoreConfig, TimeDomain, Timer, Transaction

EXTRA_KEYS = 200
"""Extra state keys ``x:{i}:{j}`` written by every transaction."""
TIMER_DOMAIN = TimeDomain.EVENT_TIME
TIMER_TAG = "crash"
COUNT_KEY = b"count"
LAST_META = "last"
EXIT_USAGE = 2
EXIT_DEDUP_LOST = 3


def rid(i: int) -> bytes:
    """The 16-byte record id transaction ``i`` marks as seen."""
    return hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).digest()


def state_key(i: int) -> bytes:
    """The state key that witnesses transaction ``i``."""
    return f"s:{i}".encode()


def state_value(i: int) -> bytes:
    """The value transaction ``i`` gives :func:`state_key`."""
    return f"state-{i}|".encode() * 4


def extra_prefix(i: int) -> bytes:
    """The prefix of transaction ``i``'s extra keys (``x:1:`` does not prefix ``x:10:``)."""
    return f"x:{i}:".encode()


def extra_key(i: int, j: int) -> bytes:
    """The ``j``-th extra state key of transaction ``i``."""
    return extra_prefix(i) + str(j).encode()


def extra_value(i: int, j: int) -> bytes:
    """The value of :func:`extra_key`; it names ``i`` and ``j``, so a misplaced value shows."""
    return f"{i}/{j}/".encode().ljust(32, b".")


def production_id(i: int) -> bytes:
    """The outbox production transaction ``i`` adds (and transaction ``i + 2`` removes)."""
    return f"p:{i}".encode()


def payload(i: int) -> bytes:
    """The payload of :func:`production_id`."""
    return f"payload-{i}|".encode() * 4


def timer_key(i: int) -> bytes:
    """The key of the timer transaction ``i`` sets (and transaction ``i + 1`` deletes)."""
    return f"k:{i}".encode()


def encode_index(i: int) -> bytes:
    """How ``count`` and the ``last`` metadata store a transaction number."""
    return str(i).encode()


def decode_index(raw: bytes | None) -> int | None:
    """Inverse of :func:`encode_index`; None stays None."""
    return None if raw is None else int(raw)


def stage(txn: Transaction, i: int) -> None:
    """Buffer every change of transaction ``i`` into ``txn``."""
    txn.put(state_key(i), state_value(i))
    txn.put(COUNT_KEY, encode_index(i))
    for j in range(EXTRA_KEYS):
        txn.put(extra_key(i, j), extra_value(i, j))
    txn.mark_seen([rid(i)])
    txn.set_timer(Timer(domain=TIMER_DOMAIN, key=timer_key(i), tag=TIMER_TAG, time_ms=i))
    if i >= 1:
        txn.delete_timer(TIMER_DOMAIN, timer_key(i - 1), TIMER_TAG)
    txn.add_outbox(production_id(i), payload(i))
    if i >= 2:
        txn.remove_outbox(production_id(i - 2))
    txn.set_meta(LAST_META, encode_index(i))


def dedup_is_consistent(txn: Transaction, i: int) -> bool:
    """Before committing ``i``: ``rid(i - 1)`` is seen (if any) and ``rid(i)`` is not."""
    if i == 0:
        return txn.seen([rid(0)]) == [False]
    return txn.seen([rid(i - 1), rid(i)]) == [True, False]


def run(store: StateStore) -> int:
    """Commit transactions after the last committed one until killed."""
    last = decode_index(store.get_meta(LAST_META))
    i = 0 if last is None else last + 1
    out = sys.stdout
    while True:
        txn = store.begin()
        if not dedup_is_consistent(txn, i):
            print(
                f"dedup lost: before transaction {i}, seen(rid({i - 1}), rid({i})) "
                "is not [True, False]",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_DEDUP_LOST
        stage(txn, i)
        out.write(f"begin {i}\n")
        out.flush()
        txn.commit()
        out.write(f"committed {i}\n")
        out.flush()
        i += 1


def main(argv: list[str]) -> int:
    """Entry point: ``crash_writer.py STORE_DIR``."""
    if len(argv) != 2:
        print(f"usage: {argv[0]} STORE_DIR", file=sys.stderr)
        return EXIT_USAGE
    with StateStore.open_rocksdb(argv[1], config=StoreConfig(sync=True)) as store:
        return run(store)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
