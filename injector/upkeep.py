"""``Upkeep``: the injector's periodic work, on one thread.

Twenty times a second: follow the leases (the injector's own routing), publish
every source stream's watermark to the :class:`WatermarkAuthority` and journal
it (watchers only ever see journaled values); once a second, rebalance (when on);
every 10 s, seal quiet streams' old active segments and apply retention. A task
that fails is logged by name and retried at its next turn; the others still run.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from millrace.deployment import write_json_durably
from millrace.injector.archive import LogArchiver
from millrace.injector.authority_journal import AuthorityJournal, JournalError
from millrace.injector.ingest_stream import IngestStream
from millrace.injector.watermark_authority import WatermarkAuthority
from millrace.statestore import Clock

log = logging.getLogger(__name__)

TICK_S = 0.05
"""The ticker's period: how often source watermarks are published."""


@dataclass(frozen=True, slots=True)
class UpkeepSettings:
    """What the upkeep does beyond watermarks (from ``InjectorConfig``)."""

    idle_excluded: frozenset[str] = frozenset()
    """Source streams that stop holding back watermarks while idle."""
    retention_ms: int | None = None
    """Sealed segments older than this, acknowledged (and archived), are deleted."""


def read_journal(path: Path) -> AuthorityJournal:
    """The watermark journal at ``path``; JournalError saying how to start without it."""
    try:
        return AuthorityJournal.from_json(json.loads(path.read_text()))
    except (JournalError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise JournalError(
            f"{path}: {exc}; move the file aside to start without it (published "
            "watermarks then restart from the sources)"
        ) from exc


class Upkeep:
    """The injector's ticker thread and its tasks."""

    def __init__(
        self,
        streams: Mapping[str, IngestStream],
        authority: WatermarkAuthority,
        journal_path: Path,
        settings: UpkeepSettings,
        *,
        clock: Clock,
        elapsed_clock: Clock,
        follow_routes: Callable[[], None],
        rebalance: Callable[[], None] | None = None,
        archiver: LogArchiver | None = None,
    ) -> None:
        """``clock``: the wall clock (retention); ``elapsed_clock``: what idleness is
        measured on; ``follow_routes`` and ``rebalance`` (None: off): the injector's."""
        self._streams = streams
        self._authority = authority
        self._journal_path = journal_path
        self._journaled_version = -1
        self._settings = settings
        self._clock = clock
        self._elapsed_clock = elapsed_clock
        self._follow_routes = follow_routes
        self._rebalance = rebalance
        self._archiver = archiver
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="injector-watermarks", daemon=True)

    def start(self) -> None:
        """Start the ticker thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the ticker (it ends after its current turn)."""
        self._stopping.set()

    def _run(self) -> None:
        tasks = self._tasks()
        ticks = 0
        while not self._stopping.wait(TICK_S):
            ticks += 1
            for task in tasks:
                if ticks % task.every_ticks == 0:
                    task.run_logged()

    def _tasks(self) -> list[_TickerTask]:
        every_10_s = round(10 / TICK_S)
        tasks = [
            _TickerTask("follow leases", 1, self._follow_routes),
            _TickerTask("publish source watermarks", 1, self._publish_source_watermarks),
            # An OSError here (a full disk): nothing new is published until it is written.
            _TickerTask("journal watermarks", 1, self.journal),
            _TickerTask("seal quiet segments", every_10_s, self._seal_old_segments),
        ]
        if self._rebalance is not None:
            tasks.append(_TickerTask("rebalance", round(1 / TICK_S), self._rebalance))
        retention_ms = self._settings.retention_ms
        if retention_ms is not None:
            retain = lambda: self._apply_retention(self._clock() - retention_ms)  # noqa: E731
            tasks.append(_TickerTask("apply retention", every_10_s, retain))
        return tasks

    def journal(self) -> None:
        """Journal the authority, then let it publish what is now durable (every tick).
        What changes while the file is written is journaled at the next tick: the
        version journaled is the one the journal was taken at (issue 30: taking the
        version after the write left such a change unpublished until another one)."""
        authority = self._authority
        if authority.version == self._journaled_version:
            return
        version, journal = authority.versioned_journal()
        write_json_durably(self._journal_path, journal.to_json())
        self._journaled_version = authority.mark_durable(journal.published, as_of=version)

    def _publish_source_watermarks(self) -> None:
        now = self._elapsed_clock()  # idleness: elapsed time, whatever the wall clock does
        excluded = self._settings.idle_excluded
        for stream in self._streams.values():
            self._authority.set_source_watermark(stream.name, stream.source_watermark(now))
            if stream.name in excluded:
                self._authority.set_source_idle(stream.name, stream.is_idle(now))

    def _seal_old_segments(self) -> None:
        """Seal active segments past ``segment_ms`` that no append has rolled (a quiet
        stream): readers of sealed segments (Spark) then see the tail too."""
        for stream in self._streams.values():
            try:
                sealed = stream.log.seal_if_due()
            except Exception:
                # The log refuses appends from now on too; the committer reports that.
                log.exception("log %s: sealing the old active segment failed", stream.name)
                continue
            if sealed is not None:
                log.info(
                    "log %s: sealed quiet segment %s (%d records)",
                    stream.name, sealed.path, sealed.records,
                    extra={"event": "segment_sealed", "stream": stream.name,
                           "records": sealed.records},
                )  # fmt: skip

    def _apply_retention(self, older_than_ms: int) -> None:
        """Drop whole sealed segments every consumer has acknowledged (and the archive
        holds, if there is one), older than the cutoff."""
        for name, stream in self._streams.items():
            keep_from = stream.forwarder.acked_offset
            if self._archiver is not None:  # the archive must hold a segment before it goes
                keep_from = min(keep_from, self._archiver.safe_offset(name))
            deleted = stream.log.delete_before(keep_from, older_than_ms=older_than_ms)
            if deleted:
                log.info("log %s: retention deleted %d segment(s)", stream.name, len(deleted))


@dataclass(frozen=True, slots=True)
class _TickerTask:
    """One job of the ticker, run every ``every_ticks`` ticks."""

    name: str
    every_ticks: int
    run: Callable[[], None]

    def run_logged(self) -> None:
        try:
            self.run()
        except OSError as exc:  # a full disk, an I/O error: said in one line, retried
            log.error("the injector's ticker task %r failed: %s", self.name, exc)
        except Exception:
            # The loop must never end: this task stalls while it fails, the others go on.
            log.exception("the injector's ticker task %r failed", self.name)
