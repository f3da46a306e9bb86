"""What a sealed segment holds, without scanning it: its ``.idx`` footer or its archive manifest.

The footer is decoded from the byte layout of ``docs/log-format.md`` (the
published contract, "so that another implementation can read them"):
``injector.log`` keeps its own index decoder private and this package may
only use its public names. ``tests/spark_logsource`` checks the result
against :meth:`injector.log.StreamLog.segments`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from millrace.injector import archive

_HEADER = struct.Struct(">8sQ")
_MAGIC = b"MRIDX\x01\n\x00"
_ENTRY_SIZE = 16
_FOOTER = struct.Struct(">IIQQQQqqqqq")
_CRC = struct.Struct(">I")
_FIXED = _HEADER.size + _FOOTER.size + _CRC.size


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    """Offsets ``[base_offset, end_offset)``, ``records`` records, ``size_bytes`` bytes.

    ``min_event_ms``/``max_event_ms`` are None when there are no records.
    ``source`` names where it comes from (``index`` or ``manifest``), for messages.
    """

    base_offset: int
    end_offset: int
    records: int
    size_bytes: int
    min_event_ms: int | None
    max_event_ms: int | None
    source: str


def decode_index_footer(data: bytes, base_offset: int) -> SegmentSummary | None:
    """The summary in the bytes of ``segment-<base_offset>.idx``; None unless it checks out.

    Checked: its crc, magic, base offset and length (``100 + 16n`` bytes).
    An invalid index is not an error for a reader: the segment is then read
    without a summary (no pruning, no length check).
    """
    if len(data) < _FIXED:
        return None
    (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
    if zlib.crc32(data[: -_CRC.size]) != crc:
        return None
    magic, base = _HEADER.unpack_from(data)
    if magic != _MAGIC or base != base_offset:
        return None
    count, _every, end, records, _commits, size, low, high, *_ = _FOOTER.unpack_from(
        data, len(data) - _CRC.size - _FOOTER.size
    )
    if _FIXED + count * _ENTRY_SIZE != len(data):
        return None
    return SegmentSummary(
        base_offset=base,
        end_offset=end,
        records=records,
        size_bytes=size,
        min_event_ms=low if records else None,
        max_event_ms=high if records else None,
        source="index",
    )


ManifestError = archive.ManifestError
"""An archive manifest entry that is not what the archive layout says."""


def decode_manifest(data: bytes, stream: str, base_offset: int) -> SegmentSummary:
    """The summary in a manifest entry ``<stream>/manifest/segment-<base_offset>.json``
    (parsed by :class:`injector.archive.ManifestEntry`, which writes them).

    Raises :class:`ManifestError` unless it is version 1 and names this
    stream and segment.
    """
    entry = archive.ManifestEntry.from_json(data, f"{stream}/{archive.segment_name(base_offset)}")
    name = archive.segment_name(base_offset)
    if entry.stream != stream or entry.segment != name:
        raise ManifestError(
            f"names stream {entry.stream!r} segment {entry.segment!r}, expected {stream!r} {name!r}"
        )
    records = entry.records
    summary = SegmentSummary(
        base_offset=entry.base_offset,
        end_offset=entry.end_offset,
        records=records,
        size_bytes=entry.size_bytes,
        min_event_ms=entry.min_event_ms if records else None,
        max_event_ms=entry.max_event_ms if records else None,
        source="manifest",
    )
    if summary.base_offset != base_offset or summary.end_offset < base_offset:
        raise ManifestError(
            f"offsets [{summary.base_offset}, {summary.end_offset}) do not fit its name"
        )
    if records and (summary.min_event_ms is None or summary.max_event_ms is None):
        raise ManifestError(f"{records} records but no event times")
    return summary
