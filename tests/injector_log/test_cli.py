"""``millrace log segments`` and ``millrace log print``, through the sub-command's parser."""

from __future__ import annotations

import argparse
import base64
import io
import json
from pathlib import Path

import pytest

from millrace.commands import log as log_command
from millrace.injector.log import AppendRequest, LogConfig, StreamLog, record_id
from tests.support import ManualClock


def run(argv: list[str]) -> tuple[int, str]:
    """Parse ``argv`` with a parser that has only the ``log`` sub-command; run its handler."""
    parser = argparse.ArgumentParser(prog="millrace")
    log_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code: int = args.handler(args, out)
    return code, out.getvalue()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    config = LogConfig(segment_bytes=300, index_every=2)
    with StreamLog.open(
        tmp_path / "clicks", "clicks", config=config, clock=ManualClock(1_000)
    ) as log:
        for i in range(5):
            log.append(
                [AppendRequest(records=[(b"user-%d" % i, b'{"n": %d}' % i, 60_000 * i)] * 3)]
            )
    with StreamLog.open(tmp_path / "binary", "binary", clock=ManualClock(2_000)) as log:
        log.append([AppendRequest(records=[(b"\xff\xfe", b"\x00\x80", 7), (b"ok", b"", 8)])])
    return tmp_path


def test_segments_lists_every_stream(log_dir: Path) -> None:
    code, out = run(["log", "segments", "--dir", str(log_dir)])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "stream",
        "base",
        "offset",
        "end",
        "offset",
        "records",
        "bytes",
        "sealed",
        "event",
        "time",
    ]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows].count("binary") == 1
    clicks = [row for row in rows if row[0] == "clicks"]
    assert len(clicks) >= 3
    assert [row[5] for row in clicks] == ["yes"] * (len(clicks) - 1) + ["no"]
    assert clicks[0][1] == "0" and sum(int(row[3]) for row in clicks) == 15
    binary = next(row for row in rows if row[0] == "binary")
    assert binary[6:] == ["1970-01-01T00:00:00.007+00:00", "..", "1970-01-01T00:00:00.008+00:00"]


def test_segments_of_one_stream(log_dir: Path) -> None:
    code, out = run(["log", "segments", "--dir", str(log_dir), "--stream", "binary"])
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["binary"]


def test_print_writes_json_lines(log_dir: Path) -> None:
    code, out = run(["log", "print", "--dir", str(log_dir), "--stream", "clicks"])
    assert code == 0
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["offset"] for d in docs] == list(range(15))
    assert docs[4] == {
        "offset": 4,
        "record_id": record_id("clicks", 4).hex(),
        "key": "user-1",
        "value": '{"n": 1}',
        "event_time_ms": 60_000,
        "ingest_time_ms": 1_000,
    }


def test_print_from_an_offset_with_a_limit(log_dir: Path) -> None:
    code, out = run(
        [
            "log",
            "print",
            "--dir",
            str(log_dir),
            "--stream",
            "clicks",
            "--from-offset",
            "7",
            "--limit",
            "4",
        ]
    )
    assert code == 0
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [7, 8, 9, 10]


def test_print_shows_bytes_that_are_not_utf8_as_base64(log_dir: Path) -> None:
    code, out = run(["log", "print", "--dir", str(log_dir), "--stream", "binary"])
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert "key" not in first and base64.b64decode(first["key_b64"]) == b"\xff\xfe"
    assert base64.b64decode(first["value_b64"]) == b"\x00\x80"
    assert (second["key"], second["value"]) == ("ok", "")


def test_missing_directory_and_stream_are_reported(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(["log", "segments", "--dir", str(log_dir / "nope")])
    assert (code, out) == (2, "")
    assert "no log directory" in capsys.readouterr().err
    code, out = run(["log", "print", "--dir", str(log_dir), "--stream", "views"])
    assert (code, out) == (2, "")
    err = capsys.readouterr().err
    assert "no log of stream 'views'" in err and "streams: binary, clicks" in err
    code, _ = run(["log", "segments", "--dir", str(log_dir), "--stream", "views"])
    assert code == 2


def test_the_cli_does_not_change_a_log_it_reads(log_dir: Path) -> None:
    active = sorted((log_dir / "clicks").glob("segment-*.log"))[-1]
    with open(active, "ab") as f:
        f.write(b"\x00\x00\x00")  # a torn tail a running writer might be producing
    code, out = run(["log", "print", "--dir", str(log_dir), "--stream", "clicks"])
    assert code == 0 and len(out.splitlines()) == 15
    assert active.read_bytes().endswith(b"\x00\x00\x00")
