"""``FileSource`` position survives retention deleting every COMMIT that carried it.

The position is committed inside the log; pushed records can keep the log
rolling until retention deletes the segments with the source's last COMMIT.
The checkpoint beside the log keeps the position, so nothing is read twice.
Real log and group committer in ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

from millrace.injector.file_source import FileSource
from millrace.injector.group_commit import GroupCommitter
from millrace.injector.log import AppendRequest, LogConfig, StreamLog
from tests.injector_unit.test_file_source_rejects import LINES, STREAM, run_source


def test_position_outlives_the_segments_that_carried_it(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "part-000.jsonl").write_text("".join(line + "\n" for line in LINES))
    directory = tmp_path / "log" / STREAM
    stream_log = StreamLog.open(directory, STREAM, config=LogConfig(fsync=False, segment_bytes=1))
    rejects = directory / "rejects.jsonl"
    try:
        first = run_source(incoming, GroupCommitter(stream_log), rejects)
        ingested = first.lines_ingested
        assert ingested == 3
        assert (directory / "file-source-position.json").exists(), "checkpointed by stop()"

        # Pushed records roll the log on (1-byte segments); retention drops the old ones.
        pushes = GroupCommitter(stream_log)
        pushes.start()
        for i in range(3):
            pushes.submit(AppendRequest(records=[(b"k", b"pushed", i)])).result()
        pushes.stop()
        deleted = stream_log.delete_before(stream_log.next_offset - 1)
        assert deleted, "segments went"
        assert not any(c.source for c in stream_log.commits()), "no COMMIT has the position"
        before = stream_log.next_offset

        committer = GroupCommitter(stream_log)
        committer.start()
        again = FileSource(incoming, committer, rejects, poll_s=0.01)
        again.start()
        try:
            assert again.position == first.position, "resumed from the checkpoint"
        finally:
            again.stop()
            committer.stop()
        assert stream_log.next_offset == before, "no line of the file was ingested twice"
    finally:
        stream_log.close()
