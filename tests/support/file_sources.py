"""Running a real file source over a directory until it reaches a position."""

from __future__ import annotations

from pathlib import Path

from millrace.injector.file_source import FileSource, Position
from millrace.injector.group_commit import GroupCommitter
from millrace.injector.log import StreamLog
from tests.support.waiting import wait_until


def tail_until(incoming: Path, stream_log: StreamLog, done: Position, rejects: Path) -> None:
    """Run a file source over ``incoming`` until its committed position is ``done``."""
    committer = GroupCommitter(stream_log)
    committer.start()
    source = FileSource(incoming, committer, rejects, batch_lines=7, poll_s=0.01)
    source.start()
    try:
        wait_until(lambda: source.position == done, 20, f"the file source to reach {done}")
    finally:
        source.stop()
        committer.stop()
