"""``FileSource``: tail a directory of JSON-lines files into one stream, each line once.

Files (``*.jsonl``) are read in name order, complete lines only. A line is
``{"key": ..., "value": ..., "ts": <event time ms>}``: ``key`` becomes UTF-8
bytes (non-strings: their JSON text); ``value`` too. Each batch of lines is
appended with its read position (file, byte offset, line number) in the same
log COMMIT as its records, so after a crash the injector resumes exactly
after the last committed line: no line is lost or ingested twice. Malformed
lines are counted and written to ``rejects.jsonl`` (file, line number,
reason); the position still moves past them. A batch's rejects are written
(and fsynced) before its commit, so none is lost; a crash in between re-reads
the batch, and the rejects already in the file are not written again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from deployment import AppendOnlyFile, write_json_durably
from engine import event_time_problem
from injector.group_commit import GroupCommitter
from injector.log import AppendRequest, LogError

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


MAX_LINE_RECORD_BYTES = 4 << 20
"""Key plus value of one line's record (what the Ingest service accepts too)."""


def parse_line(text: str) -> tuple[bytes, bytes, int]:
    """A JSON line as ``(key, value, ts)``; ValueError says what is wrong."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, got {type(body).__name__}")
    missing = [field for field in ("key", "value", "ts") if field not in body]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    ts = body["ts"]
    if not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError(f"'ts' must be integer milliseconds, got {ts!r}")
    problem = event_time_problem(ts)
    if problem is not None:
        raise ValueError(f"'ts': {problem}")
    key, value = _as_bytes(body["key"]), _as_bytes(body["value"])
    if len(key) + len(value) > MAX_LINE_RECORD_BYTES:
        raise ValueError(
            f"key + value are {len(key) + len(value)} bytes; the limit is {MAX_LINE_RECORD_BYTES}"
        )
    return key, value, ts


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if type(value) is int:  # what json.dumps writes for an int, without its encoder
        return str(value).encode()
    return json.dumps(value).encode()


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
        self._written_rejects = self._load_rejects()
        self._rejects = AppendOnlyFile(rejects_path)
        self.lines_ingested = 0
        self.lines_rejected = 0
        """Malformed lines this process wrote to the rejects file."""
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
        return sorted(p for p in self.directory.glob("*.jsonl") if p.name >= self.position.file)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                progressed = self._ingest_new_lines()
                if not progressed:
                    self._checkpoint()
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
            progressed |= self._ingest_file(path)
        return progressed

    def _ingest_file(self, path: Path) -> bool:
        start = self.position if path.name == self.position.file else Position(path.name, 0, 1)
        with open(path, "rb") as handle:
            handle.seek(start.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1  # complete lines only
        if end == 0:
            if start != self.position:
                self.position = start
            return False
        records: list[tuple[bytes, bytes, int]] = []
        rejects: list[dict[str, object]] = []
        offset, line = start.offset, start.line
        cursor = 0
        while cursor < end:
            newline = data.index(b"\n", cursor)
            raw = data[cursor:newline]
            cursor = newline + 1
            if raw.strip():
                try:
                    records.append(parse_line(raw.decode()))
                except (ValueError, UnicodeDecodeError) as exc:
                    rejects.append({"file": path.name, "line": line, "reason": str(exc)})
            line += 1
            if len(records) + len(rejects) >= self._batch_lines or cursor >= end:
                self._commit(records, rejects, Position(path.name, offset + cursor, line))
                records, rejects = [], []
        return True

    def _commit(
        self,
        records: list[tuple[bytes, bytes, int]],
        rejects: list[dict[str, object]],
        position: Position,
    ) -> None:
        new = [r for r in rejects if (r["file"], r["line"]) not in self._written_rejects]
        if new:
            self._rejects.append("".join(json.dumps(reject) + "\n" for reject in new).encode())
            self._written_rejects.update((str(r["file"]), int(str(r["line"]))) for r in new)
            self.lines_rejected += len(new)
        request = AppendRequest(records=records, source=position.encode())
        self._committer.submit(request).result()
        self.lines_ingested += len(records)
        self.position = position
        self._written_rejects.difference_update((r["file"], r["line"]) for r in rejects)
