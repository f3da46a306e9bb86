"""An interval's store directory sent over ``Admin.HandOver`` and written down durably.

The sender streams every file of a closed store directory (RocksDB's SST files,
MANIFEST, CURRENT, OPTIONS and write-ahead logs, the dedup filters' files) in
pieces of at most :data:`PIECE_BYTES`; RocksDB's lock and its own info logs stay
behind. A copy ahead streams a running store's SST files first (immutable once
written), so that after the fence only the files written since cross. The
receiver writes them into ``<dir>.incoming``, fsyncs each file, and only once the
stream says ``done`` (and names every file of the store) swaps the directory in
(renames, then fsyncs the parent): a crash at any point leaves either no store or
the whole one, never half. Names come from the network, so each is checked to be one
plain file name.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from millrace.deployment import fsync_directory
from millrace.wire.v1 import admin_pb2

PIECE_BYTES = 1 << 20
"""Most bytes of one piece (gRPC's default message limit is 4 MiB)."""
_LEFT_BEHIND = ("LOCK", "LOG")
"""RocksDB's lock file and its info logs (``LOG``, ``LOG.old.*``): not state."""
MAX_NAME = 255


class TransferError(Exception):
    """The stream of pieces was not a whole store (cut short, or a bad file name)."""


def _kept(name: str) -> bool:
    return not any(name == left or name.startswith(f"{left}.old") for left in _LEFT_BEHIND)


def is_immutable(name: str) -> bool:
    """RocksDB's table files: written once, never changed, named by a number never reused."""
    return name.endswith(".sst")


def store_pieces(
    directory: Path, epoch: int, *, only_immutable: bool = False, have: Iterable[str] = ()
) -> Iterator[admin_pb2.StoreFilePiece]:
    """The pieces of every file of the store in ``directory``; the last one says ``done``
    and carries ``epoch`` and the names of all its files.

    ``only_immutable``: the table files only, from a store that is still running (a
    file compacted away meanwhile is skipped); ``have``: immutable files the receiver
    holds already, not sent again."""
    held = {name for name in have if is_immutable(name)}
    names: list[str] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if not _kept(name) or (only_immutable and not is_immutable(name)):
            continue
        try:
            file = path.open("rb")
        except (FileNotFoundError, IsADirectoryError):
            continue  # compacted away while listed (a running store), or not a file
        with file:
            names.append(name)
            if name in held:
                continue
            first = True
            while True:
                data = file.read(PIECE_BYTES)
                if not data and not first:
                    break
                yield admin_pb2.StoreFilePiece(name=name, data=data)
                first = False
                if len(data) < PIECE_BYTES:
                    break
    yield admin_pb2.StoreFilePiece(done=True, epoch=epoch, files=names)


def _checked_name(name: str) -> str:
    if (
        not name
        or len(name) > MAX_NAME
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
    ):
        raise TransferError(f"not a plain file name: {name[:80]!r}")
    return name


def _incoming(directory: Path) -> Path:
    return directory.with_name(f"{directory.name}.incoming")


def _write_pieces(
    pieces: Iterable[admin_pb2.StoreFilePiece], incoming: Path
) -> admin_pb2.StoreFilePiece:
    """Write the streamed files into ``incoming`` (each fsynced); the last piece."""
    current: tuple[str, int] | None = None
    seen: set[str] = set()
    try:
        for piece in pieces:
            if piece.done:
                return piece
            name = _checked_name(piece.name)
            if current is None or current[0] != name:
                if current is not None:
                    _close(current[1])
                    current = None
                if name in seen:
                    raise TransferError(f"file {name!r} sent twice")
                seen.add(name)
                fd = os.open(incoming / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                current = (name, fd)
            view = memoryview(piece.data)
            while view:
                view = view[os.write(current[1], view) :]
        raise TransferError("the store's stream ended before its last piece")
    finally:
        if current is not None:
            _close(current[1])


def copy_ahead(pieces: Iterable[admin_pb2.StoreFilePiece], directory: Path) -> list[str]:
    """Write a copy ahead (the immutable files of a running store) into the incoming
    directory of ``directory``, replacing any there; the names written."""
    incoming = _incoming(directory)
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir(parents=True)
    try:
        return list(_write_pieces(pieces, incoming).files)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def receive_store(
    pieces: Iterable[admin_pb2.StoreFilePiece], directory: Path, *, ahead: bool = False
) -> int:
    """Write the streamed store into ``directory`` (replacing what is there, only once the
    whole store has arrived, durably); the epoch the sender's store had. ``ahead``: the
    incoming directory holds a copy ahead (:func:`copy_ahead`) to complete."""
    incoming = _incoming(directory)
    if not ahead or not incoming.is_dir():
        shutil.rmtree(incoming, ignore_errors=True)
        incoming.mkdir(parents=True)
    try:
        last = _write_pieces(pieces, incoming)
        if last.files:  # every file of the store: drop what was compacted away since
            listed = set(last.files)
            missing = [name for name in listed if not (incoming / name).is_file()]
            if missing:
                raise TransferError(f"the store's files {sorted(missing)[:3]} never arrived")
            for path in incoming.iterdir():
                if path.name not in listed:
                    path.unlink()
        fsync_directory(incoming)
        replaced = directory.with_name(f"{directory.name}.replaced")
        shutil.rmtree(replaced, ignore_errors=True)
        if directory.exists():
            directory.rename(replaced)
        incoming.rename(directory)
        fsync_directory(directory.parent)
        shutil.rmtree(replaced, ignore_errors=True)
        return last.epoch
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def _close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
