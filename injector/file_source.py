"""``FileSource``: tail a directory of JSON-lines files into one stream, each line once.

Every file (``*.jsonl``) is read once, whatever its name and whenever it arrives:
the source reads one file at a time (the one it is in, then the others in name
order), and once it moves on from a file it records that file as finished
(``file-source-finished.json``, written durably before the next file's first
commit), as Spark's and Flink's file sources remember the files they processed. A
finished file is not read again: lines appended to it after the source moved on
are not ingested, and a new file under a finished one's name is not read while
that name is listed (the names of files removed from the directory are dropped
from the list). Files are read complete lines only, at most
:data:`READ_BYTES` at a time (a file of any size is tailed in bounded memory; a
line longer than that is rejected, unread, once its end is written). A line is
``{"key": ..., "value": ..., "ts": <event time ms>}``: ``key`` becomes UTF-8
bytes (non-strings: their JSON text); ``value`` too (:mod:`injector.json_lines`).
Each batch of lines is appended with its read position (file, byte offset, line
number) in the same log COMMIT as its records, so after a crash the injector
resumes exactly after the last committed line: no line is lost or ingested
twice. The next batch is parsed while the previous one is being written and
fsynced; it is submitted only once that one is committed. Malformed
lines are counted and written to ``rejects.jsonl`` (file, line number,
reason); the position still moves past them. A batch's rejects are written
(and fsynced) before its commit, so none is lost; a crash in between re-reads
the batch, and the rejects already in the file are not written again. Once the stream is
finished (``millrace finish``), the source reads no more.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import chain, islice, repeat
from pathlib import Path
from typing import BinaryIO

from millrace.dataplane import RecordBatch
from millrace.deployment import AppendOnlyFile, write_json_durably
from millrace.injector.group_commit import Acked, GroupCommitter, StreamFinishedError
from millrace.injector.json_lines import parse_lines
from millrace.injector.log import AppendRequest, LogError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Position:
    """Where reading resumes: ``offset`` bytes into ``file`` (line ``line`` is next)."""

    file: str = ""
    offset: int = 0
    line: int = 1

    def encode(self) -> bytes:
        return json.dumps({"file": self.file, "offset": self.offset, "line": self.line}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Position:
        body = json.loads(raw)
        return cls(file=body["file"], offset=int(body["offset"]), line=int(body["line"]))


class FileSource:
    """One directory tailed into one stream through that stream's committer."""

    def __init__(
        self,
        directory: Path,
        committer: GroupCommitter,
        rejects_path: Path,
        *,
        batch_lines: int = 1000,
        poll_s: float = 0.1,
    ) -> None:
        self.directory = directory
        self._committer = committer
        self._rejects_path = rejects_path
        self._batch_lines = batch_lines
        self._poll_s = poll_s
        # A copy of the committed position outside the log: retention may delete every
        # segment holding this source's COMMITs while pushed records keep the log rolling.
        self._checkpoint_path = rejects_path.with_name("file-source-position.json")
        self.position = self._recover()
        self._checkpointed = self.position
        self._finished_path = rejects_path.with_name("file-source-finished.json")
        self.finished = self._load_finished()
        """Names of the files this source is done with (never read again)."""
        self._written_rejects = self._load_rejects()
        self._rejects = AppendOnlyFile(rejects_path)
        self.lines_ingested = 0
        self.lines_rejected = 0
        """Malformed lines this process wrote to the rejects file."""
        self._long_line: tuple[Position, int] | None = None
        """An unfinished line longer than a read: where it starts, and its bytes so far."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"file-source-{directory}", daemon=True
        )

    def _recover(self) -> Position:
        """The last committed position: the log's newest COMMIT that carries one, else
        the checkpoint (written only after commits, so never ahead of the log)."""
        position: Position | None = None
        for commit in self._committer.log.commits():
            if commit.source:
                position = Position.decode(commit.source)
        if position is not None:
            return position
        try:
            return Position.decode(self._checkpoint_path.read_bytes())
        except FileNotFoundError:
            return Position()

    def _checkpoint(self) -> None:
        """Copy the committed position outside the log (once it stopped moving)."""
        if self.position != self._checkpointed:
            position = self.position
            body = {"file": position.file, "offset": position.offset, "line": position.line}
            write_json_durably(self._checkpoint_path, body)
            self._checkpointed = position

    def _load_finished(self) -> set[str]:
        """The finished files' names. Without the list (a source that ran before it was
        kept), the files named before the current one: the name order it read in."""
        try:
            return set(json.loads(self._finished_path.read_bytes())["finished"])
        except FileNotFoundError:
            current = self.position.file
            finished = {p.name for p in self.directory.glob("*.jsonl") if p.name < current}
            # Written at once: from now on the list, not the names, says what was read.
            write_json_durably(self._finished_path, {"finished": sorted(finished)})
            return finished

    def _mark_finished(self, name: str) -> None:
        """Record durably that ``name`` is done (everything read of it is committed)."""
        present = {p.name for p in self.directory.glob("*.jsonl")}
        finished = (self.finished & present) | {name}
        write_json_durably(self._finished_path, {"finished": sorted(finished)})
        self.finished = finished

    def _load_rejects(self) -> set[tuple[str, int]]:
        """``(file, line)`` of the rejects already written at or past the committed position
        (those of a batch whose commit a crash prevented); cuts a torn last line."""
        try:
            with open(self._rejects_path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return set()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            # A crash while writing it: that batch was not committed, it is written again.
            os.truncate(self._rejects_path, complete)
        after = (self.position.file, self.position.line)
        written: set[tuple[str, int]] = set()
        for raw in data[:complete].splitlines():
            try:
                reject = json.loads(raw)
                where = (str(reject["file"]), int(reject["line"]))
            except (ValueError, KeyError, TypeError):
                log.warning("%s: ignoring a line that is not a reject: %r", self._rejects_path, raw)
                continue
            if where >= after:
                written.add(where)
        return written

    def start(self) -> None:
        """Start tailing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the batch in progress."""
        self._stopping.set()
        self._thread.join(10)
        self._rejects.close()
        try:
            self._checkpoint()
        except OSError as exc:  # the log holds the position too: only a shortcut is lost
            log.warning("file source %s: checkpoint not written: %s", self.directory, exc)

    def _files(self) -> list[Path]:
        """The file being read (if any), then the unfinished others in name order."""
        current = self.position.file
        waiting = (p for p in self.directory.glob("*.jsonl") if p.name not in self.finished)
        return sorted(waiting, key=lambda p: (p.name != current, p.name))

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                progressed = self._ingest_new_lines()
                if not progressed:
                    self._checkpoint()
            except StreamFinishedError as exc:
                log.warning("file source %s: %s; it reads no more", self.directory, exc)
                return
            except (LogError, OSError) as exc:
                # A full disk (the log's or the rejects file's): nothing past the committed
                # position counts as read; the same lines are read again once writes work.
                log.error("file source %s: %s; retrying in 1 s", self.directory, exc)
                self._stopping.wait(1.0)
                continue
            if not progressed:
                self._stopping.wait(self._poll_s)

    def _ingest_new_lines(self) -> bool:
        progressed = False
        for path in self._files():
            if self._stopping.is_set():
                break
            current = self.position.file
            if current and path.name != current and current not in self.finished:
                # Moving on: everything read of the current file is committed (each
                # file's last batch is waited for), so it is done, before the next
                # file's first commit.
                self._mark_finished(current)
            progressed |= self._ingest_file(path)
        return progressed

    def _ingest_file(self, path: Path) -> bool:
        start = self.position if path.name == self.position.file else Position(path.name, 0, 1)
        progressed = False
        in_flight: _InFlight | None = None
        with open(path, "rb") as handle:
            while not self._stopping.is_set():
                handle.seek(start.offset)
                data = handle.read(READ_BYTES)
                end = data.rfind(b"\n") + 1  # complete lines only
                before = start
                if end:
                    in_flight, start = self._ingest_lines(data, end, start, in_flight)
                elif len(data) == READ_BYTES:
                    in_flight, start = self._reject_long_line(handle, start, in_flight)
                if start == before:
                    break  # nothing, or an incomplete last line: wait for more
                progressed = True
                if len(data) < READ_BYTES:
                    break
        if in_flight is not None:
            self._finish(in_flight)
        elif not progressed and start != self.position:
            self.position = start  # a new file with no complete line yet
        return progressed

    def _ingest_lines(
        self, data: bytes, end: int, start: Position, in_flight: _InFlight | None
    ) -> tuple[_InFlight | None, Position]:
        """Submit the complete lines ``data[:end]`` read at ``start`` in batches (each one
        after the previous one committed); the last batch in flight, and where they end."""
        pieces: list[RecordBatch] = []
        count = 0
        rejects: list[dict[str, object]] = []
        lines = chain.from_iterable(map(bytes.split, _windows(data, end), repeat(b"\n")))
        line, consumed = start.line, 0
        while group := list(islice(lines, self._batch_lines - count - len(rejects))):
            consumed += sum(map(len, group)) + len(group)
            records, malformed = parse_lines(group)
            rejects += (
                {"file": start.file, "line": line + at, "reason": str(exc)} for at, exc in malformed
            )
            pieces.append(records)
            count += len(records)
            line += len(group)
            if count + len(rejects) >= self._batch_lines or consumed >= end:
                if in_flight is not None:
                    self._finish(in_flight)
                position = Position(start.file, start.offset + consumed, line)
                in_flight = self._start(RecordBatch.concat(pieces), rejects, position)
                pieces, count, rejects = [], 0, []
        return in_flight, Position(start.file, start.offset + end, line)

    def _reject_long_line(
        self, handle: BinaryIO, start: Position, in_flight: _InFlight | None
    ) -> tuple[_InFlight | None, Position]:
        """The line at ``start`` is longer than :data:`READ_BYTES`: find its end without
        keeping it, and submit it as a reject. ``start`` again if its end is not written
        (the next poll reads on from where this one stopped)."""
        scanned = self._long_line
        skipped = scanned[1] if scanned is not None and scanned[0] == start else READ_BYTES
        handle.seek(start.offset + skipped)
        while chunk := handle.read(READ_BYTES):
            newline = chunk.find(b"\n")
            if newline >= 0:
                if in_flight is not None:
                    self._finish(in_flight)
                reason = f"the line is longer than {READ_BYTES} bytes (not read)"
                reject = {"file": start.file, "line": start.line, "reason": reason}
                after = Position(start.file, start.offset + skipped + newline + 1, start.line + 1)
                return self._start(RecordBatch(), [reject], after), after
            skipped += len(chunk)
        self._long_line = (start, skipped)
        return in_flight, start

    def _start(
        self, records: RecordBatch, rejects: list[dict[str, object]], position: Position
    ) -> _InFlight:
        """Write the batch's new rejects durably, then submit its records and position."""
        new = [r for r in rejects if (r["file"], r["line"]) not in self._written_rejects]
        if new:
            self._rejects.append("".join(json.dumps(reject) + "\n" for reject in new).encode())
            self._written_rejects.update((str(r["file"]), int(str(r["line"]))) for r in new)
            self.lines_rejected += len(new)
        request = AppendRequest(records=records, source=position.encode())
        return _InFlight(self._committer.submit(request), len(records), rejects, position)

    def _finish(self, batch: _InFlight) -> None:
        """Wait for the batch's commit; the position moves past it."""
        batch.acked.result()
        self.lines_ingested += batch.records
        self.position = batch.position
        self._written_rejects.difference_update((r["file"], r["line"]) for r in batch.rejects)


READ_BYTES = 64 << 20
"""Bytes of a file read at a time; more than any valid line needs (a record's key and
value take at most 4 MiB, written as JSON text at most 6 bytes a byte)."""
WINDOW_BYTES = 1 << 20
"""Lines are split from the file's data this much at a time."""


def _windows(data: bytes, end: int) -> Iterator[bytes]:
    """``data[:end]`` (complete lines) in pieces of whole lines, each about
    :data:`WINDOW_BYTES`, without their last newline."""
    cursor = 0
    while cursor < end:
        cut = data.rfind(b"\n", cursor, cursor + WINDOW_BYTES)
        if cut < 0:  # a line longer than the window
            cut = data.index(b"\n", cursor + WINDOW_BYTES)
        yield data[cursor:cut]
        cursor = cut + 1


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A batch submitted to the committer, not yet known to be committed."""

    acked: Future[Acked]
    records: int
    rejects: list[dict[str, object]]
    position: Position
