"""``millrace log``: inspect the injector's durable stream logs, and accept a lost tail.

``millrace log segments --dir LOG_DIR [--stream S]`` lists segments (and lost ranges);
``millrace log print --dir LOG_DIR --stream S [--from-offset N] [--limit N]``
prints records as JSON lines. Both open logs read-only: safe next to a
running injector, and they never truncate a torn tail.
``millrace log accept-loss --dir LOG_DIR --stream S`` (the injector stopped) records
a lost tail and continues the log above every acknowledged offset.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from millrace.injector.forwarder import STATE_FILE, load_acknowledged
from millrace.injector.log import LogError, LogRecord, LostRange, SegmentInfo, StreamLog

EXIT_OK = 0
EXIT_LOG_ERROR = 1
EXIT_NOT_FOUND = 2
PRINT_BATCH = 1000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``log`` sub-command (with ``segments`` and ``print``)."""
    parser = subparsers.add_parser(
        "log",
        help="inspect the injector's durable stream logs",
        description="Inspect the injector's durable stream logs (read-only).",
    )
    actions = parser.add_subparsers(dest="log_command", metavar="ACTION", required=True)

    segments = actions.add_parser(
        "segments",
        help="list the segments of every stream (or one)",
        description="List segments: stream, offsets, records, bytes, sealed, event-time range.",
    )
    segments.add_argument("--dir", required=True, help="the log directory (one folder per stream)")
    segments.add_argument("--stream", help="only this stream")
    segments.set_defaults(handler=run_segments)

    show = actions.add_parser(
        "print",
        help="print a stream's records as JSON lines",
        description=(
            "Print records as JSON lines: offset, record id (hex), key and value (UTF-8 "
            "text, or key_b64/value_b64 when not valid UTF-8), event and ingest times."
        ),
    )
    show.add_argument("--dir", required=True, help="the log directory (one folder per stream)")
    show.add_argument("--stream", required=True, help="the stream to print")
    show.add_argument(
        "--from-offset", type=int, default=None, help="first offset (default: oldest)"
    )
    show.add_argument("--limit", type=int, default=None, help="at most this many records")
    show.set_defaults(handler=run_print)

    accept = actions.add_parser(
        "accept-loss",
        help="accept that a stream's log lost acknowledged records, and go on above them",
        description=(
            "For an injector that refuses to start because a stream's log ends below "
            "offsets its consumers acknowledged (the tail was lost) and no backup of the "
            "segments exists: record the lost offsets in <stream>/lost.json and make the "
            "log continue above every acknowledged offset, so no record id is reused. "
            "Stop the injector first."
        ),
    )
    accept.add_argument("--dir", required=True, help="the log directory (one folder per stream)")
    accept.add_argument("--stream", required=True, help="the stream whose loss to accept")
    accept.set_defaults(handler=run_accept_loss)


def run_segments(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """List segments as a table; returns the exit code."""
    out = out or sys.stdout
    root = Path(args.dir)
    if not root.is_dir():
        return _fail(f"no log directory {str(root)!r}")
    streams = [args.stream] if args.stream else _streams(root)
    if not streams:
        return _fail(f"no stream logs in {str(root)!r}")
    rows: list[tuple[str, SegmentInfo]] = []
    losses: list[tuple[str, LostRange]] = []
    for stream in streams:
        try:
            log = _open(root, stream)
        except FileNotFoundError:
            return _fail(_no_stream(root, stream))
        except (LogError, ValueError) as exc:
            return _fail(str(exc), EXIT_LOG_ERROR)
        with log:
            rows.extend((stream, info) for info in log.segments())
            losses.extend((stream, lost) for lost in log.lost)
    _print_table(rows, out)
    for stream, lost in losses:
        out.write(
            f"{stream}: offsets {lost.first}..{lost.end - 1} lost ({lost.records} records), "
            f"accepted at {_time(lost.recorded_ms)}\n"
        )
    return EXIT_OK


def run_print(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print records as JSON lines; returns the exit code."""
    out = out or sys.stdout
    root = Path(args.dir)
    if not root.is_dir():
        return _fail(f"no log directory {str(root)!r}")
    if args.limit is not None and args.limit < 0:
        return _fail("--limit must not be negative")
    if args.from_offset is not None and args.from_offset < 0:
        return _fail("--from-offset must not be negative")
    try:
        log = _open(root, args.stream)
    except FileNotFoundError:
        return _fail(_no_stream(root, args.stream))
    except (LogError, ValueError) as exc:
        return _fail(str(exc), EXIT_LOG_ERROR)
    with log:
        offset = log.first_offset if args.from_offset is None else args.from_offset
        left = args.limit if args.limit is not None else log.next_offset
        try:
            while left > 0:
                records = log.read(offset, min(PRINT_BATCH, left))
                if not records:
                    break
                for record in records:
                    out.write(json.dumps(record_json(record)) + "\n")
                offset = records[-1].offset + 1
                left -= len(records)
        except LogError as exc:
            return _fail(str(exc), EXIT_LOG_ERROR)
    return EXIT_OK


def run_accept_loss(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Record a lost log tail and continue above the acknowledged offsets; the exit code."""
    out = out or sys.stdout
    path = Path(args.dir) / args.stream
    if not path.is_dir():
        return _fail(_no_stream(Path(args.dir), args.stream))
    default, consumers = load_acknowledged(path / STATE_FILE)
    acknowledged = max(consumers.values(), default=default)
    try:
        with StreamLog.open(path, args.stream) as log:
            if acknowledged <= log.next_offset:
                out.write(
                    f"stream {args.stream!r}: nothing is lost (the log ends at offset "
                    f"{log.next_offset}; acknowledged: below {acknowledged})\n"
                )
                return EXIT_OK
            lost = log.skip_lost(acknowledged)
    except LogError as exc:
        return _fail(f"{exc} (stop the injector first)", EXIT_LOG_ERROR)
    out.write(
        f"stream {args.stream!r}: offsets {lost.first}..{lost.end - 1} ({lost.records} "
        f"records) recorded as lost at {_time(lost.recorded_ms)} in {path / 'lost.json'}; "
        f"the log goes on at offset {lost.end}\n"
    )
    return EXIT_OK


def record_json(record: LogRecord) -> dict[str, object]:
    """One record as a JSON object (bytes as UTF-8 text, else base64 under ``*_b64``)."""
    doc: dict[str, object] = {"offset": record.offset, "record_id": record.record_id.hex()}
    for name, data in (("key", record.key), ("value", record.value)):
        try:
            doc[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            doc[f"{name}_b64"] = base64.b64encode(data).decode("ascii")
    doc["event_time_ms"] = record.event_time_ms
    doc["ingest_time_ms"] = record.ingest_time_ms
    return doc


def _open(root: Path, stream: str) -> StreamLog:
    """Open ``<root>/<stream>`` read-only; FileNotFoundError if it is not a stream's log."""
    if not stream or stream in {".", ".."} or "/" in stream or "\0" in stream:
        raise FileNotFoundError(stream)
    path = root / stream
    if not any(path.glob("segment-*.log")):
        raise FileNotFoundError(str(path))
    return StreamLog.open(path, stream, read_only=True)


def _streams(root: Path) -> list[str]:
    return sorted(
        child.name
        for child in root.iterdir()
        if child.is_dir() and any(child.glob("segment-*.log"))
    )


def _no_stream(root: Path, stream: str) -> str:
    known = ", ".join(_streams(root)) or "none"
    return f"no log of stream {stream!r} in {str(root)!r} (streams: {known})"


def _fail(message: str, code: int = EXIT_NOT_FOUND) -> int:
    print(f"millrace log: {message}", file=sys.stderr)
    return code


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _print_table(rows: list[tuple[str, SegmentInfo]], out: TextIO) -> None:
    header = ("stream", "base offset", "end offset", "records", "bytes", "sealed", "event time")
    cells = [
        (
            stream,
            str(info.base_offset),
            str(info.end_offset),
            str(info.records),
            str(info.size_bytes),
            "yes" if info.sealed else "no",
            "-"
            if info.min_event_ms is None
            else f"{_time(info.min_event_ms)} .. {_time(info.max_event_ms)}",
        )
        for stream, info in rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    for row in [header, *cells]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")
