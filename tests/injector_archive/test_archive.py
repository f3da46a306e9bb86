"""The log archive (``injector.archive``): sealed segments copied to a ``file://`` URI.

In-process: a real ``StreamLog`` with small segments and a real archive
directory; the archive must hold every sealed segment byte for byte, survive
a copy cut short, refuse a tampered file and keep its own retention. Across a
real injector process: what the injector acknowledged is what the archive
holds, and local retention never deletes a segment the archive lacks.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.injector.archive import ArchiveError, ArchiveLocation, LogArchiver, ManifestEntry
from millrace.injector.client import IngestClient
from millrace.injector.log import AppendRequest, LogConfig, StreamLog, scan_segment
from tests.support import InjectorProcess, free_port, wait_until

T0 = 1_700_000_000_000


def write_requests(log: StreamLog, requests: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    for number in range(requests):
        records = [
            (f"k{i}".encode(), f"v{number}-{i}".encode() * 5, T0 + rng.randrange(-5000, 5000))
            for i in range(rng.randint(1, 6))
        ]
        log.append([AppendRequest(records=records)])


@pytest.fixture
def stream_log(tmp_path: Path) -> Iterator[StreamLog]:
    log = StreamLog.open(tmp_path / "log" / "s", "s", config=LogConfig(segment_bytes=1500))
    yield log
    log.close()


def archiver_for(
    log: StreamLog, uri: str, clock: list[int] | None = None, **kw: object
) -> LogArchiver:
    now = clock or [T0]
    return LogArchiver(
        ArchiveLocation(uri),
        lambda: {log.stream: log},
        clock=lambda: now[0],
        **kw,  # type: ignore[arg-type]
    )


def test_every_sealed_segment_is_archived_byte_for_byte(
    stream_log: StreamLog, tmp_path: Path
) -> None:
    write_requests(stream_log, 60)
    uri = (tmp_path / "archive").as_uri()
    archiver = archiver_for(stream_log, uri)
    archiver.load()  # no thread: run_once does one pass
    sealed = [s for s in stream_log.segments() if s.sealed]
    assert len(sealed) >= 3
    assert archiver.pending("s") == len(sealed)
    assert archiver.run_once() == len(sealed)
    assert archiver.run_once() == 0 and archiver.pending("s") == 0

    location = ArchiveLocation(uri)
    assert location.streams() == ["s"]
    entries = location.entries("s")
    assert [(e.base_offset, e.end_offset, e.records) for e in entries] == [
        (s.base_offset, s.end_offset, s.records) for s in sealed
    ]
    for entry, segment in zip(entries, sealed, strict=True):
        local = Path(segment.path).read_bytes()
        assert location.read_segment(entry) == local
        assert entry.crc32 == zlib.crc32(local)
        assert (entry.min_event_ms, entry.max_event_ms) == (
            segment.min_event_ms,
            segment.max_event_ms,
        )
        index = Path(segment.path).with_suffix(".idx").read_bytes()
        assert (
            tmp_path / "archive" / "s" / Path(segment.path).with_suffix(".idx").name
        ).read_bytes() == index
    # Everything archived: local retention may go up to the active segment.
    assert archiver.safe_offset("s") == stream_log.segments()[-1].base_offset


def test_a_copy_cut_short_is_invisible_and_redone(stream_log: StreamLog, tmp_path: Path) -> None:
    write_requests(stream_log, 40)
    first = stream_log.segments()[0]
    archive = tmp_path / "archive"
    (archive / "s").mkdir(parents=True)
    # A crash mid-copy: part of the .log, no manifest entry.
    (archive / "s" / Path(first.path).name).write_bytes(Path(first.path).read_bytes()[:100])
    uri = archive.as_uri()
    assert ArchiveLocation(uri).entries("s") == []
    archiver = archiver_for(stream_log, uri)
    archiver.load()
    assert archiver.safe_offset("s") == first.base_offset  # nothing archived: nothing may go
    archiver.run_once()
    [entry, *_] = ArchiveLocation(uri).entries("s")
    assert ArchiveLocation(uri).read_segment(entry) == Path(first.path).read_bytes()


def test_a_tampered_archive_file_is_refused(stream_log: StreamLog, tmp_path: Path) -> None:
    write_requests(stream_log, 30)
    uri = (tmp_path / "archive").as_uri()
    archiver = archiver_for(stream_log, uri)
    archiver.load()
    archiver.run_once()
    location = ArchiveLocation(uri)
    entry = location.entries("s")[0]
    path = tmp_path / "archive" / "s" / entry.segment
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="the manifest says"):
        location.read_segment(entry)
    (tmp_path / "archive" / "s" / "manifest" / "segment-00000000000000000000.json").write_text("{")
    with pytest.raises(ArchiveError, match="not a manifest entry"):
        location.entries("s")


def test_archive_retention_drops_the_oldest_prefix(stream_log: StreamLog, tmp_path: Path) -> None:
    write_requests(stream_log, 60)
    uri = (tmp_path / "archive").as_uri()
    now = [T0]
    archiver = archiver_for(stream_log, uri, now, retention_ms=10_000)
    archiver.load()
    archiver.run_once()
    entries = ArchiveLocation(uri).entries("s")
    newest = max(e.max_ingest_ms or 0 for e in entries)
    now[0] = newest + 10_001  # every segment's last append is older than retention ...
    archiver.run_once()
    assert ArchiveLocation(uri).entries("s") == []
    assert not list((tmp_path / "archive" / "s").glob("segment-*"))
    # ... but a deleted archive copy is not made again (the local segment is still there),
    # not even by an archiver started anew.
    assert archiver.run_once() == 0
    again = archiver_for(stream_log, uri, now)
    again.load()
    assert again.run_once() == 0 and again.pending("s") == 0


def test_manifest_entries_round_trip() -> None:
    entry = ManifestEntry(
        stream="s", segment="segment-00000000000000000007.log", base_offset=7, end_offset=9,
        records=2, min_event_ms=-5, max_event_ms=10, min_ingest_ms=None, max_ingest_ms=None,
        size_bytes=100, crc32=12345, archived_ms=T0,
    )  # fmt: skip
    assert ManifestEntry.from_json(entry.to_json(), "x") == entry


def test_an_unknown_scheme_is_a_clear_error() -> None:
    with pytest.raises(ArchiveError, match="nosuch://"):
        ArchiveLocation("nosuch://bucket/x")


# -- a real injector process ------------------------------------------------------------

TOPOLOGY = """
[streams.events]
[streams.out]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["out"]
"""


@pytest.mark.slow
def test_the_injector_archives_what_it_acknowledged(tmp_path: Path) -> None:
    """No node runs, so nothing is acknowledged downstream and local retention keeps
    everything; the archive gets every sealed segment, and they hold exactly the
    acknowledged records of the sealed prefix."""
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    port = free_port()
    archive = tmp_path / "archive"
    (tmp_path / "deployment.toml").write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{port}"
segment_bytes = 4096
retention_ms = 0
archive_uri = "{archive.as_uri()}"
[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{free_port()}"
[sinks.out]
address = "127.0.0.1:{free_port()}"
"""
    )
    sent: list[bytes] = []
    log_dir = tmp_path / "log"
    with InjectorProcess(tmp_path / "deployment.toml", log_dir, tmp_path / "injector.stderr"):
        client = IngestClient(f"127.0.0.1:{port}", timeout_s=10)
        for number in range(40):
            values = [f"r{number}-{i}".encode() * 4 for i in range(20)]
            client.ingest(
                "events", [(b"k", v, T0 + number) for v in values], idempotency_key=f"r{number}"
            )
            sent.extend(values)
        client.close()
        log = StreamLog.open(log_dir / "events", "events", read_only=True)
        sealed = [s for s in log.segments() if s.sealed]
        log.close()
        assert len(sealed) >= 5
        location = ArchiveLocation(archive.as_uri())
        wait_until(lambda: len(location.entries("events")) == len(sealed), 20, "the archive copy")
    entries = location.entries("events")
    archived: list[bytes] = []
    for entry in entries:
        path = archive / "events" / entry.segment
        archived.extend(r.value for r in scan_segment(path, "events"))  # type: ignore[union-attr]
    assert archived == sent[: len(archived)] and len(archived) == sum(s.records for s in sealed)
    # Retention 0 deletes nothing: no consumer acknowledged anything.
    assert len(list((log_dir / "events").glob("segment-*.log"))) == len(sealed) + 1
