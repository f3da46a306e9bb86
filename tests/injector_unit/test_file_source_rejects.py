"""``FileSource`` rejects: each malformed line is in the rejects file once, across crashes.

A batch's rejects are written before its log commit; a crash in between
re-reads the batch after the restart. A real log and group committer in
``tmp_path``; the crash is a commit that fails after the rejects were written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from millrace.injector.file_source import FileSource, Position
from millrace.injector.group_commit import Acked, GroupCommitter
from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from tests.support import wait_until

STREAM = "events"
LINES = [
    '{"key": "a", "value": 1, "ts": 1000}',
    "not json",
    '{"key": "b", "value": 2, "ts": 1001}',
    '{"key": "c", "value": 3}',
    '{"key": "d", "value": 4, "ts": 1002}',
]
BAD_LINES = {2, 4}


class CrashingCommitter(GroupCommitter):
    """Fails its first ``crashes`` submissions (a process dying before the commit)."""

    def __init__(self, stream_log: StreamLog, crashes: int) -> None:
        super().__init__(stream_log)
        self.crashes = crashes

    def submit(self, request: AppendRequest) -> Future[Acked]:
        if self.crashes:
            self.crashes -= 1
            failed: Future[Acked] = Future()
            failed.set_exception(RuntimeError("crash before the commit"))
            return failed
        return super().submit(request)


@pytest.fixture
def incoming(tmp_path: Path) -> Path:
    directory = tmp_path / "incoming"
    directory.mkdir()
    (directory / "part-000.jsonl").write_text("".join(line + "\n" for line in LINES))
    return directory


@pytest.fixture
def stream_log(tmp_path: Path) -> Iterator[StreamLog]:
    log = StreamLog.open(tmp_path / "log" / STREAM, STREAM, config=LogConfig(fsync=False))
    yield log
    log.close()


def run_source(incoming: Path, committer: GroupCommitter, rejects: Path) -> FileSource:
    """Tail ``incoming`` until every line is committed (``committer`` started and stopped)."""
    committer.start()
    source = FileSource(incoming, committer, rejects, poll_s=0.01)
    source.start()
    end = Position("part-000.jsonl", (incoming / "part-000.jsonl").stat().st_size, len(LINES) + 1)
    try:
        wait_until(lambda: source.position == end, 20, "the file source to commit every line")
    finally:
        source.stop()
        committer.stop()
    return source


def reject_lines(rejects: Path) -> list[tuple[str, int]]:
    return [(r["file"], r["line"]) for r in map(json.loads, rejects.read_text().splitlines())]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_crash_between_the_rejects_and_the_commit_writes_no_reject_twice(
    incoming: Path, stream_log: StreamLog, tmp_path: Path
) -> None:
    rejects = tmp_path / "log" / STREAM / "rejects.jsonl"
    crashing = CrashingCommitter(stream_log, crashes=1)
    crashing.start()
    crashed = FileSource(incoming, crashing, rejects, poll_s=0.01)
    crashed.start()
    try:
        wait_until(lambda: not crashing.crashes, 20, "the crash")
    finally:
        crashed.stop()
        crashing.stop()
    assert sorted(reject_lines(rejects)) == [("part-000.jsonl", n) for n in sorted(BAD_LINES)]
    assert not list(stream_log.commits()), "the batch was not committed"

    source = run_source(incoming, GroupCommitter(stream_log), rejects)
    assert sorted(reject_lines(rejects)) == [("part-000.jsonl", n) for n in sorted(BAD_LINES)]
    assert source.lines_rejected == 0, "nothing new to write"
    assert source.lines_ingested == len(LINES) - len(BAD_LINES)
    assert [r.key for r in stream_log.read(0, 100)] == [b"a", b"b", b"d"]


def test_a_torn_reject_is_cut_and_written_again(
    incoming: Path, stream_log: StreamLog, tmp_path: Path
) -> None:
    """A crash while writing the rejects: the complete one stays, the torn one is redone."""
    rejects = tmp_path / "log" / STREAM / "rejects.jsonl"
    written = json.dumps({"file": "part-000.jsonl", "line": 2, "reason": "not JSON"})
    rejects.write_text(written + '\n{"file": "part-000.jsonl", "li')
    source = run_source(incoming, GroupCommitter(stream_log), rejects)
    lines = rejects.read_text().splitlines()
    assert lines[0] == written, "what was there is kept as it was"
    assert reject_lines(rejects) == [("part-000.jsonl", 2), ("part-000.jsonl", 4)]
    assert json.loads(lines[1])["reason"] == "missing field(s): event_time_ms"
    assert source.lines_rejected == 1


def test_rejects_of_committed_lines_do_not_hide_new_ones(
    incoming: Path, stream_log: StreamLog, tmp_path: Path
) -> None:
    """After a clean run, a restart reads on from the committed position: a malformed line
    appended later is rejected with its own line number."""
    rejects = tmp_path / "log" / STREAM / "rejects.jsonl"
    run_source(incoming, GroupCommitter(stream_log), rejects)
    with open(incoming / "part-000.jsonl", "a") as out:
        out.write("[1, 2]\n")
    committer = GroupCommitter(stream_log)
    committer.start()
    source = FileSource(incoming, committer, rejects, poll_s=0.01)
    source.start()
    try:
        wait_until(lambda: source.lines_rejected == 1, 20, "the new reject")
    finally:
        source.stop()
        committer.stop()
    assert reject_lines(rejects) == [("part-000.jsonl", n) for n in (2, 4, 6)]
