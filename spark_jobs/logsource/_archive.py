"""The log archive: sealed segments copied under a URI, each announced by a manifest entry.

Layout (written by the injector's archiver)::

    <archive_uri>/<stream>/segment-<base:020d>.log       the segment, byte for byte
    <archive_uri>/<stream>/segment-<base:020d>.idx       its index
    <archive_uri>/<stream>/manifest/segment-<base:020d>.json   written after both

A segment is in the archive only once its manifest entry exists. Every
access goes through ``pyarrow.fs`` (``FileSystem.from_uri``: ``file://``,
``s3://``, ``gs://``, ``hdfs://``, ...), which reads credentials the usual
way (for S3: the ``AWS_*`` environment variables, the shared credentials
file, the instance role).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from millrace.spark_jobs._log_reader import LogDirError

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_MANIFEST_NAME = re.compile(r"segment-(\d{20})\.json")
MANIFEST_DIR = "manifest"
_READERS = 16
"""Manifest entries read at once (small objects: on S3 each is a request)."""


def is_uri(location: str) -> bool:
    """True if ``location`` has a URI scheme (``s3://...``): an archive, not a log directory."""
    return _URI.match(location) is not None


def join_uri(uri: str, *parts: str) -> str:
    """``uri`` with ``parts`` appended to its path (a query string, if any, stays at the end)."""
    base, mark, query = uri.partition("?")
    return "/".join((base.rstrip("/"), *parts)) + mark + query


def open_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """The file system and path of ``uri``; :class:`LogDirError` if pyarrow cannot resolve it."""
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError, pa.ArrowException) as error:
        raise LogDirError(f"cannot open {uri!r}: {error}") from error
    return fs, path


@dataclass(frozen=True, slots=True)
class ArchivedSegment:
    """A segment announced by a manifest entry: where the entry and the segment file are."""

    stream: str
    base_offset: int
    manifest_path: str
    """The manifest entry's path in the archive's file system."""
    segment_uri: str


def open_archive(uri: str) -> tuple[pafs.FileSystem, str]:
    """The file system and root path of the archive at ``uri``; :class:`LogDirError` if absent."""
    fs, root = open_uri(uri)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        raise LogDirError(f"no log archive at {uri!r}")
    return fs, root


def list_archive(
    uri: str,
    streams: Sequence[str] | None,
    keep: Callable[[str], bool] = lambda stream: True,
) -> tuple[pafs.FileSystem, list[str], dict[str, list[ArchivedSegment]]]:
    """The archive's file system, its streams (those named, else every one) and their segments.

    Without ``streams``, the streams are the directories with at least one
    manifest entry; a segment is a manifest entry (``manifest/segment-*.json``),
    by base offset. Streams ``keep`` refuses are left out without listing
    their entries. Raises :class:`LogDirError` for a missing archive, an
    invalid stream name or a named stream without a directory.
    """
    fs, root = open_archive(uri)
    root = root.rstrip("/")
    if streams is None:
        chosen = sorted(
            info.base_name
            for info in fs.get_file_info(pafs.FileSelector(root))
            if info.type == pafs.FileType.Directory
        )
    else:
        chosen = list(dict.fromkeys(streams))
        for stream in chosen:
            check_stream_name(stream)
            if fs.get_file_info(f"{root}/{stream}").type != pafs.FileType.Directory:
                raise LogDirError(f"no stream {stream!r} in the log archive {uri!r}")
    segments: dict[str, list[ArchivedSegment]] = {}
    for stream in filter(keep, chosen):
        manifests = f"{root}/{stream}/{MANIFEST_DIR}"
        selector = pafs.FileSelector(manifests, allow_not_found=True)
        bases = sorted(
            int(match.group(1))
            for info in fs.get_file_info(selector)
            if (match := _MANIFEST_NAME.fullmatch(info.base_name))
        )
        if bases or streams is not None:
            segments[stream] = [
                ArchivedSegment(
                    stream,
                    base,
                    f"{manifests}/segment-{base:020d}.json",
                    join_uri(uri, stream, f"segment-{base:020d}.log"),
                )
                for base in bases
            ]
    return fs, list(segments), segments


def read_manifests(fs: pafs.FileSystem, segments: Sequence[ArchivedSegment]) -> list[bytes | None]:
    """The bytes of each segment's manifest entry (None for one that is gone), in order."""

    def read(segment: ArchivedSegment) -> bytes | None:
        try:
            with fs.open_input_stream(segment.manifest_path) as f:
                data: bytes = f.read()
        except FileNotFoundError:
            return None
        return data

    if len(segments) <= 1:
        return [read(segment) for segment in segments]
    with ThreadPoolExecutor(min(_READERS, len(segments))) as pool:
        return list(pool.map(read, segments))


def check_stream_name(stream: str) -> None:
    """:class:`LogDirError` unless ``stream`` can be a stream directory's name."""
    if not stream or "/" in stream or stream in (".", ".."):
        raise LogDirError(f"{stream!r} is not a stream name")
