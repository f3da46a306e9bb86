"""``AfterSync``: runs what must wait for a commit's fsync, off the worker thread.

A worker commits without waiting for the disk and goes on with its next
batch; this thread syncs the write-ahead log (one sync covers every commit
queued so far) and only then runs the actions that need those commits to be
durable: acks upstream and sends downstream, in commit order. The fsync of
batch N thus overlaps the processing of batch N+1 instead of stalling it.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

from millrace.statestore import StoreClosedError

log = logging.getLogger(__name__)

EXIT_SYNC_FAILED = 75
"""Exit status when a sync fails: the process stops rather than ack what may be lost."""

_STOP = object()


class AfterSync:
    """One thread per interval: sync, then run the queued actions in order."""

    def __init__(self, sync: Callable[[], None], name: str) -> None:
        self._sync = sync
        self._queue: queue.SimpleQueue[Callable[[], None] | object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once every commit made before this call is durable."""
        self._queue.put(action)

    def stop(self, timeout: float = 5.0) -> None:
        """Run what is queued (after a last sync), then stop."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            actions = [item for item in items if item is not _STOP and callable(item)]
            if actions and not self._sync_or_exit():
                return
            for action in actions:
                try:
                    action()
                except Exception:
                    log.exception("an action after a commit failed")
            if len(actions) < len(items):
                return

    def _sync_or_exit(self) -> bool:
        """True once synced; False when the store was closed under us (a shutdown that
        did not wait): then nothing queued is acted on, and senders resend it later."""
        try:
            self._sync()
        except StoreClosedError:
            log.info("store closed before its last sync; %s unacknowledged", self._thread.name)
            return False
        except Exception:
            # Commits after the failed sync sit in RocksDB's memory and were read by
            # later batches: the only safe state is the one on disk. Stop; the
            # supervisor restarts the node, which recovers from what was synced.
            log.critical("syncing the write-ahead log failed; stopping", exc_info=True)
            logging.shutdown()
            os._exit(EXIT_SYNC_FAILED)
        return True
