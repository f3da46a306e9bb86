"""An archive URI through ``pyarrow.fs``: ``file://``, ``s3://``, ``hdfs://``, ``gs://``...

Layout under the URI (the same file names as the local log, ``docs/log-format.md``)::

    <stream>/segment-<base:020d>.log        the segment's bytes, unchanged
    <stream>/segment-<base:020d>.idx        its index, unchanged
    <stream>/manifest/segment-<base:020d>.json   written last: the segment is archived
    <stream>/expired.json                   offsets below this were expired by retention

Object stores have no rename, so files are written in place and the manifest
entry is the commit point. On a local filesystem every file is also fsynced,
and so is its directory, before the entry that makes it visible.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from millrace.injector.archive._manifest import ManifestEntry, ManifestError

COPY_CHUNK = 4 << 20
MANIFEST_DIR = "manifest"
EXPIRED_FILE = "expired.json"
"""Per stream: ``{"expired_before": offset}``, so expired segments are not archived again."""


class ArchiveError(Exception):
    """The archive URI cannot be resolved or read, or holds something invalid."""


def is_uri(location: str) -> bool:
    """Whether ``location`` names an archive (``scheme://...``) rather than a local log dir."""
    return "://" in location


class ArchiveLocation:
    """The archive at one URI: list, read and write segments and their manifest entries."""

    def __init__(self, uri: str) -> None:
        """Resolve ``uri`` (raises :class:`ArchiveError` for an unknown scheme or bad URI)."""
        try:
            self.fs, root = pafs.FileSystem.from_uri(uri)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OSError) as exc:
            raise ArchiveError(f"archive {uri!r}: {exc}") from exc
        self.uri = uri
        self.root = root.rstrip("/")
        self._local = isinstance(self.fs, pafs.LocalFileSystem)

    def __repr__(self) -> str:
        return f"ArchiveLocation({self.uri!r})"

    def _path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    # -- reading -------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the archive's root directory is there."""
        return bool(self._info(self.root).type == pafs.FileType.Directory)

    def streams(self) -> list[str]:
        """Stream directories with a manifest, sorted."""
        if not self.exists():
            raise ArchiveError(f"no archive at {self.uri!r}")
        selector = pafs.FileSelector(self.root, allow_not_found=True)
        streams = [
            info.base_name
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.Directory
            and self._info(self._path(info.base_name, MANIFEST_DIR)).type == pafs.FileType.Directory
        ]
        return sorted(streams)

    def entries(self, stream: str) -> list[ManifestEntry]:
        """The stream's archived segments, oldest first (raises :class:`ArchiveError` for
        an entry that cannot be read: the archive is the system of record)."""
        selector = pafs.FileSelector(self._path(stream, MANIFEST_DIR), allow_not_found=True)
        found = []
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
                continue
            try:
                entry = ManifestEntry.from_json(self.read_bytes(info.path), info.path)
            except ManifestError as exc:
                raise ArchiveError(str(exc)) from exc
            if entry.stream != stream:
                raise ArchiveError(f"{info.path}: entry of stream {entry.stream!r}")
            found.append(entry)
        return sorted(found, key=lambda e: e.base_offset)

    def expired_before(self, stream: str) -> int:
        """Offsets below this were archived once and expired by the archive's retention."""
        path = self._path(stream, EXPIRED_FILE)
        if self._info(path).type != pafs.FileType.File:
            return 0
        try:
            value = json.loads(self.read_bytes(path))["expired_before"]
            if type(value) is not int:
                raise TypeError(value)
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"{self.uri}/{stream}/{EXPIRED_FILE}: not valid ({exc})") from exc
        return value

    def set_expired_before(self, stream: str, offset: int) -> None:
        """Record that retention removes everything below ``offset`` (before removing it)."""
        self._write(
            self._path(stream, EXPIRED_FILE), json.dumps({"expired_before": offset}).encode()
        )

    def segment_path(self, stream: str, name: str) -> str:
        """The filesystem path of an archived file of ``stream``."""
        return self._path(stream, name)

    def read_bytes(self, path: str) -> bytes:
        """A whole file's bytes."""
        with self.fs.open_input_stream(path) as stream:
            data: bytes = stream.read()
        return data

    def read_segment(self, entry: ManifestEntry) -> bytes:
        """The ``.log`` bytes of an archived segment, checked against its entry."""
        data = self.read_bytes(self._path(entry.stream, entry.segment))
        if len(data) != entry.size_bytes or zlib.crc32(data) != entry.crc32:
            raise ArchiveError(
                f"{self.uri}/{entry.stream}/{entry.segment}: {len(data)} bytes with crc "
                f"{zlib.crc32(data)}, the manifest says {entry.size_bytes} with {entry.crc32}"
            )
        return data

    def _info(self, path: str) -> pafs.FileInfo:
        [info] = self.fs.get_file_info([path])
        return info

    # -- writing -------------------------------------------------------------------

    def put_segment(
        self, stream: str, log_path: Path, make_entry: Callable[[int, int], ManifestEntry]
    ) -> ManifestEntry:
        """Copy a sealed segment (``.log`` then its ``.idx``), then write its manifest entry.

        ``make_entry(size_bytes, crc32)`` builds the entry from what was copied.
        Rewriting a segment whose copy was cut short is harmless: the bytes are
        the same sealed bytes.
        """
        self.fs.create_dir(self._path(stream, MANIFEST_DIR), recursive=True)
        size, crc = self._copy(log_path, self._path(stream, log_path.name))
        index = log_path.with_suffix(".idx")
        if index.exists():
            self._copy(index, self._path(stream, index.name))
        entry = make_entry(size, crc)
        if self._local:
            _fsync_dir(self._path(stream))
        self._write(self._path(stream, MANIFEST_DIR, Path(entry.segment).stem + ".json"),
                    entry.to_json())  # fmt: skip
        return entry

    def delete_segment(self, entry: ManifestEntry) -> None:
        """Archive retention: the entry first (the segment stops being archived), then files."""
        stem = Path(entry.segment).stem
        for path in (
            self._path(entry.stream, MANIFEST_DIR, stem + ".json"),
            self._path(entry.stream, entry.segment),
            self._path(entry.stream, stem + ".idx"),
        ):
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)

    def _copy(self, source: Path, target: str) -> tuple[int, int]:
        size, crc = 0, 0
        with open(source, "rb") as f, self.fs.open_output_stream(target) as out:
            while chunk := f.read(COPY_CHUNK):
                out.write(chunk)
                size += len(chunk)
                crc = zlib.crc32(chunk, crc)
        if self._local:
            _fsync_file(target)
        return size, crc

    def _write(self, target: str, data: bytes) -> None:
        with self.fs.open_output_stream(target) as out:
            out.write(data)
        if self._local:
            _fsync_file(target)
            _fsync_dir(os.path.dirname(target))


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
