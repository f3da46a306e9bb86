"""Every file a file source's directory receives is read once, whatever its name (issue
30: a late file whose name sorted before the position was never read, silently)."""

from __future__ import annotations

import json
from pathlib import Path

from millrace.injector.file_source import Position
from millrace.injector.log import LogConfig, StreamLog
from tests.support.file_sources import tail_until

STREAM = "events"


def lines(prefix: str, count: int) -> bytes:
    rows = (json.dumps({"key": f"{prefix}{n}", "value": n, "ts": 1000 + n}) for n in range(count))
    return "".join(row + "\n" for row in rows).encode()


def run_until(tmp_path: Path, incoming: Path, done: Position) -> list[bytes]:
    """A source over ``incoming`` (reopening the log, as after a restart) run until its
    position is ``done``; every key in the log."""
    log = StreamLog.open(tmp_path / "log" / STREAM, STREAM, config=LogConfig(fsync=False))
    tail_until(incoming, log, done, tmp_path / "log" / STREAM / "rejects.jsonl")
    keys = [record.key for record in log.read(0, 100_000)]
    log.close()
    return keys


def test_a_late_file_named_before_the_position_is_read_once(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "host-b.jsonl").write_bytes(b := lines("b", 20))
    assert len(run_until(tmp_path, incoming, Position("host-b.jsonl", len(b), 21))) == 20
    (incoming / "host-a.jsonl").write_bytes(a := lines("a", 15))  # sorts before host-b
    keys = run_until(tmp_path, incoming, Position("host-a.jsonl", len(a), 16))
    assert keys == [f"b{n}".encode() for n in range(20)] + [f"a{n}".encode() for n in range(15)]
    # Restarted again, with a third file: nothing read twice.
    (incoming / "host-0.jsonl").write_bytes(zero := lines("z", 3))
    keys = run_until(tmp_path, incoming, Position("host-0.jsonl", len(zero), 4))
    assert len(keys) == len(set(keys)) == 38


def test_a_source_that_ran_before_the_list_keeps_its_name_order(tmp_path: Path) -> None:
    """Upgrading: without the finished list, the files named before the position were
    read (the old name order), so they are taken as finished, not read again."""
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for name in ("1.jsonl", "2.jsonl"):
        (incoming / name).write_bytes(lines(name[0], 4))
    second = len(lines("2", 4))
    run_until(tmp_path, incoming, Position("2.jsonl", second, 5))
    (tmp_path / "log" / STREAM / "file-source-finished.json").unlink()
    keys = run_until(tmp_path, incoming, Position("2.jsonl", second, 5))
    assert len(keys) == 8
    assert json.loads((tmp_path / "log" / STREAM / "file-source-finished.json").read_text()) == {
        "finished": ["1.jsonl"]
    }
