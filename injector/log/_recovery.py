"""Opening a stream's directory: load sealed segments, recover the active one.

1. List the directory: ``segment-*.log`` files by base offset; remove leftover
   ``*.idx.tmp`` files and indexes whose segment retention already deleted.
2. Every segment but the last is sealed: load its index (a missing or bad
   index is rebuilt by scanning; a sealed segment that does not scan clean
   is :class:`LogCorruptedError`, because acknowledged records live there).
3. The last segment is sealed if it has a valid index (a crash hit between
   sealing it and creating the next one). Otherwise it is the active segment:
   scan it, and cut everything after the last valid COMMIT (a torn or bad
   entry, records without their COMMIT), reported as a :class:`RecoveryReport`.
   Unless a valid COMMIT of a *later* request lies beyond the bad entry: a
   crash only tears the tail, and a request is written after the one before
   it was synced, so the damaged request was acknowledged. Cutting it would
   hand its offsets (record ids) to new records: :class:`LogCorruptedError`.
4. Check the segments chain: each starts where the previous one ends.

Read-only opens change nothing on disk: they only stop at the valid end.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

from millrace.injector.log._format import (
    COMMIT,
    ENTRY_PREFIX,
    HEADER_SIZE,
    PREFIX_SIZE,
    EntryError,
    decode_commit,
    decode_header,
    header_is_torn,
    index_name,
    iter_requests,
    parse_name,
    segment_name,
)
from millrace.injector.log._index import IndexInvalidError, SegmentSummary, read_index, write_index
from millrace.injector.log._lost import LostRange, lost_gap, past_loss
from millrace.injector.log._segment import Segment
from millrace.injector.log._types import LogConfig, RecoveryReport
from millrace.injector.log.errors import LogCorruptedError

logger = logging.getLogger(__name__)

_TMP_NAME = re.compile(r"segment-\d{20}\.idx\.tmp")
# Where a COMMIT entry may start: a body length below 16 MiB (first byte 0) and the
# COMMIT type byte right after the 8-byte prefix. Overlapping, hence the lookahead.
_COMMIT_CANDIDATE = re.compile(rb"(?=\x00.{7}" + re.escape(bytes([COMMIT])) + rb")", re.DOTALL)


def load_segments(
    directory: Path,
    *,
    config: LogConfig,
    clock: Callable[[], int],
    read_only: bool,
    lost: tuple[LostRange, ...] = (),
) -> tuple[list[Segment], RecoveryReport | None]:
    """The segments of ``directory``, the last one active (steps in the module docstring).

    A writable open always ends with an active segment (a new one when the
    directory is empty or its last segment is sealed, or above a ``lost`` range
    that starts at the log's end). The report is None when there was no segment
    to recover. Segments are contiguous but at a ``lost`` range.
    """
    bases = _list_segments(directory, read_only=read_only)
    segments = [_load_sealed(directory, base, config, read_only) for base in bases[:-1]]
    report = None
    if bases:
        last, report = _load_last(directory, bases[-1], config, clock, read_only)
        segments.append(last)
    for before, after in pairwise(segments):
        if before.end_offset != after.base_offset and not lost_gap(
            lost, before.end_offset, after.base_offset
        ):
            raise LogCorruptedError(
                str(after.path),
                None,
                f"it starts at offset {after.base_offset} but the segment before it ends at "
                f"{before.end_offset}",
            )
    if not read_only:
        end = segments[-1].end_offset if segments else 0
        if past_loss(lost, end) != end and segments and not segments[-1].sealed:
            # A loss accepted above the log's end, its next segment not made yet.
            segments[-1].seal(fsync=config.fsync)
        if segments and not segments[-1].sealed:
            segments[-1].open_for_append()
        else:
            base = past_loss(lost, end)
            segments.append(
                Segment.create(
                    directory,
                    base,
                    created_ms=clock(),
                    index_every=config.index_every,
                    fsync=config.fsync,
                )
            )
    return segments, report


def rebuild(segment: Segment, f: BinaryIO, file_size: int) -> EntryError | None:
    """Fill a fresh ``segment``'s statistics and index by scanning its file's entries.

    Stops at the first entry that fails validation and returns its error;
    ``segment.size`` is then the end of the last valid COMMIT.
    """
    every = segment.index_every
    next_index = segment.base_offset
    try:
        for records, commit, end in iter_requests(f, segment.base_offset, HEADER_SIZE, file_size):
            if records:
                events = [record[3] for record in records]
                low, high = min(events), max(events)
                if segment.records:
                    segment.min_event_ms = min(segment.min_event_ms, low)
                    segment.max_event_ms = max(segment.max_event_ms, high)
                else:
                    segment.min_event_ms, segment.max_event_ms = low, high
                for position, _body, offset, *_ in records:
                    if offset == next_index:
                        segment.index.append((offset, position))
                        next_index += every
            at = commit.committed_at_ms
            if segment.commits:
                segment.min_ingest_ms = min(segment.min_ingest_ms, at)
                segment.max_ingest_ms = max(segment.max_ingest_ms, at)
            else:
                segment.min_ingest_ms = segment.max_ingest_ms = segment.created_ms = at
            segment.commits += 1
            segment.records += commit.count
            segment.size = end
            segment.end_offset = commit.first_offset + commit.count
    except EntryError as error:
        return error
    return None


def _list_segments(directory: Path, *, read_only: bool) -> list[int]:
    """Base offsets of the segment files, ascending; tidies leftovers unless ``read_only``."""
    logs: set[int] = set()
    indexes: set[int] = set()
    for name in os.listdir(directory):
        if _TMP_NAME.fullmatch(name):
            if not read_only:
                (directory / name).unlink(missing_ok=True)
            continue
        parsed = parse_name(name)
        if parsed is not None:
            (logs if parsed[1] == "log" else indexes).add(parsed[0])
    if not read_only:
        for orphan in indexes - logs:  # retention deletes the .log first
            (directory / index_name(orphan)).unlink(missing_ok=True)
    return sorted(logs)


def _mtime_ms(path: Path) -> int:
    return path.stat().st_mtime_ns // 1_000_000


def _check_header(path: Path, f: BinaryIO, base: int) -> None:
    try:
        found = decode_header(f.read(HEADER_SIZE))
    except EntryError as error:
        raise LogCorruptedError(str(path), 0, error.reason) from error
    if found != base:
        raise LogCorruptedError(str(path), 0, f"header says base offset {found}, name {base}")


def _valid_index(directory: Path, base: int, size: int) -> SegmentSummary:
    summary = read_index(directory / index_name(base))
    if summary.base_offset != base or summary.size_bytes != size:
        raise IndexInvalidError(
            f"describes base {summary.base_offset} and {summary.size_bytes} bytes, "
            f"the segment has base {base} and {size} bytes"
        )
    return summary


def _load_sealed(directory: Path, base: int, config: LogConfig, read_only: bool) -> Segment:
    path = directory / segment_name(base)
    size = path.stat().st_size
    with open(path, "rb") as f:
        _check_header(path, f, base)
        try:
            return Segment.from_summary(directory, _valid_index(directory, base, size))
        except IndexInvalidError as problem:
            logger.warning("rebuilding the index of sealed segment %s (%s)", path, problem)
        segment = Segment(
            directory, base, created_ms=_mtime_ms(path), index_every=config.index_every
        )
        error = rebuild(segment, f, size)
    if error is not None:
        raise LogCorruptedError(str(path), error.position, error.reason)
    segment.sealed = True
    if not read_only:
        write_index(segment.index_path, segment.summary(), fsync=config.fsync)
    return segment


def _load_last(
    directory: Path, base: int, config: LogConfig, clock: Callable[[], int], read_only: bool
) -> tuple[Segment, RecoveryReport]:
    path = directory / segment_name(base)
    size = path.stat().st_size
    try:
        segment = Segment.from_summary(directory, _valid_index(directory, base, size))
    except IndexInvalidError:
        pass  # the usual case: the active segment has no index
    else:
        with open(path, "rb") as f:
            _check_header(path, f, base)
        return segment, RecoveryReport(
            segment=str(path), truncated_bytes=0, dropped_entries=0, reason=""
        )
    if not read_only:
        segment_index = directory / index_name(base)
        segment_index.unlink(missing_ok=True)  # a bad index of the active segment: stale
    segment = Segment(directory, base, created_ms=_mtime_ms(path), index_every=config.index_every)
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
        try:
            found = decode_header(head)
        except EntryError as bad_header:
            if not header_is_torn(head):
                raise LogCorruptedError(str(path), 0, bad_header.reason) from bad_header
            return _reset_torn_header(segment, size, clock(), config, read_only)
        if found != base:
            raise LogCorruptedError(str(path), 0, f"header says base offset {found}, name {base}")
        error = rebuild(segment, f, size)
        later = None if error is None else _later_commit(f, error.position, size, segment)
    if error is not None and later is not None:
        position, first = later
        message = (
            f"{error.reason} at byte {error.position}, yet a valid commit of offsets from "
            f"{first} follows at byte {position}: acknowledged records lie past the damage. "
            "The log will not cut them and reuse their offsets; restore this segment from "
            "a copy"
        )
        if not read_only:
            raise LogCorruptedError(str(path), error.position, message)
        logger.warning("%s: %s (reading up to the damage)", path, message)
    if error is None:
        return segment, RecoveryReport(
            segment=str(path), truncated_bytes=0, dropped_entries=0, reason=""
        )
    report = RecoveryReport(
        segment=str(path),
        truncated_bytes=size - segment.size,
        dropped_entries=error.uncommitted + (1 if error.complete else 0),
        reason=f"{error.reason} at byte {error.position}",
    )
    logger.warning(
        "recovered %s: cut %d bytes (%d entries) after the last valid commit: %s",
        path,
        report.truncated_bytes,
        report.dropped_entries,
        report.reason,
    )
    if not read_only:
        _truncate(path, segment.size, fsync=config.fsync)
    return segment, report


def _later_commit(
    f: BinaryIO, position: int, file_size: int, segment: Segment
) -> tuple[int, int] | None:
    """A valid COMMIT past the bad entry at ``position`` of a request after the damaged
    one (which starts at ``segment.end_offset``): its byte position and first offset."""
    f.seek(position + 1)
    data = f.read(file_size - position - 1)
    for match in _COMMIT_CANDIDATE.finditer(data):
        at = match.start()
        length, crc = ENTRY_PREFIX.unpack_from(data, at)
        body = data[at + PREFIX_SIZE : at + PREFIX_SIZE + length]
        if len(body) != length or zlib.crc32(body) != crc:
            continue
        try:
            commit = decode_commit(body, position + 1 + at)
        except EntryError:
            continue
        if commit.first_offset > segment.end_offset:
            return position + 1 + at, commit.first_offset
    return None


def _reset_torn_header(
    segment: Segment, size: int, now_ms: int, config: LogConfig, read_only: bool
) -> tuple[Segment, RecoveryReport]:
    """A crash while creating the segment left less than its header: start it again."""
    segment.created_ms = now_ms
    if not read_only:
        segment.path.unlink()
        segment = Segment.create(
            segment.path.parent,
            segment.base_offset,
            created_ms=now_ms,
            index_every=config.index_every,
            fsync=config.fsync,
        )
        segment.close()  # reopened for append with the others
    logger.warning("recovered %s: rewrote its torn header (%d bytes)", segment.path, size)
    return segment, RecoveryReport(
        segment=str(segment.path),
        truncated_bytes=size,
        dropped_entries=0,
        reason="torn segment header",
    )


def _truncate(path: Path, size: int, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
