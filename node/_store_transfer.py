"""An interval's store directory sent over ``Admin.HandOver`` and written down durably.

The sender streams every file of a closed store directory (RocksDB's SST files,
MANIFEST, CURRENT, OPTIONS and write-ahead logs, the dedup filters' files) in
pieces of at most :data:`PIECE_BYTES`; RocksDB's lock and its own info logs stay
behind. The receiver writes them into ``<dir>.incoming``, fsyncs each file,
and only once the stream says ``done`` swaps the directory in (renames, then
fsyncs the parent): a crash at any point leaves either no store or the whole
one, never half. Names come from the network, so each is checked to be one
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


def store_pieces(directory: Path, epoch: int) -> Iterator[admin_pb2.StoreFilePiece]:
    """The pieces of every file of the (closed) store in ``directory``; the last one
    says ``done`` and carries ``epoch``, the store's epoch."""
    for path in sorted(directory.iterdir()):
        if not path.is_file() or not _kept(path.name):
            continue
        with path.open("rb") as file:
            first = True
            while True:
                data = file.read(PIECE_BYTES)
                if not data and not first:
                    break
                yield admin_pb2.StoreFilePiece(name=path.name, data=data)
                first = False
                if len(data) < PIECE_BYTES:
                    break
    yield admin_pb2.StoreFilePiece(done=True, epoch=epoch)


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


def receive_store(pieces: Iterable[admin_pb2.StoreFilePiece], directory: Path) -> int:
    """Write the streamed store into ``directory`` (replacing what is there, only once the
    whole store has arrived, durably); the epoch the sender's store had."""
    incoming = directory.with_name(f"{directory.name}.incoming")
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir(parents=True)
    current: tuple[str, int] | None = None
    epoch: int | None = None
    try:
        for piece in pieces:
            if piece.done:
                epoch = piece.epoch
                break
            name = _checked_name(piece.name)
            if current is None or current[0] != name:
                if current is not None:
                    _close(current[1])
                    current = None
                if (incoming / name).exists():
                    raise TransferError(f"file {name!r} sent twice")
                fd = os.open(incoming / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                current = (name, fd)
            view = memoryview(piece.data)
            while view:
                view = view[os.write(current[1], view) :]
        if current is not None:
            _close(current[1])
            current = None
        if epoch is None:
            raise TransferError("the store's stream ended before its last piece")
        fsync_directory(incoming)
        replaced = directory.with_name(f"{directory.name}.replaced")
        shutil.rmtree(replaced, ignore_errors=True)
        if directory.exists():
            directory.rename(replaced)
        incoming.rename(directory)
        fsync_directory(directory.parent)
        shutil.rmtree(replaced, ignore_errors=True)
        return epoch
    except BaseException:
        if current is not None:
            os.close(current[1])
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def _close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
