"""A manifest entry: the archive's record that one sealed segment is there, whole.

``<archive_uri>/<stream>/manifest/segment-<base:020d>.json`` is written after
the segment's ``.log`` and ``.idx`` are; readers trust a segment only when its
entry exists, so a copy cut short by a crash is invisible (and redone).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

MANIFEST_VERSION = 1


class ManifestError(ValueError):
    """A manifest entry that is not valid JSON of the expected shape."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestEntry:
    """One archived segment: where its offsets, event and ingest times lie, and its checksum.

    Times are None for a segment without records (event) or commits (ingest).
    ``crc32`` is ``zlib.crc32`` of the whole ``.log`` file, ``size_bytes`` its length.
    """

    stream: str
    segment: str
    """The file name, ``segment-<base_offset:020d>.log``."""
    base_offset: int
    end_offset: int
    records: int
    min_event_ms: int | None
    max_event_ms: int | None
    min_ingest_ms: int | None
    max_ingest_ms: int | None
    size_bytes: int
    crc32: int
    archived_ms: int
    """When the copy completed (the injector's clock)."""

    def to_json(self) -> bytes:
        """The entry's file content."""
        return json.dumps({"version": MANIFEST_VERSION, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> ManifestEntry:
        """Parse an entry file's content; ``where`` names it in the error."""
        try:
            raw = json.loads(data)
            if raw.get("version") != MANIFEST_VERSION:
                raise ManifestError(f"{where}: manifest version {raw.get('version')!r} is not 1")
            return cls(
                stream=_str(raw, "stream"),
                segment=_str(raw, "segment"),
                base_offset=_int(raw, "base_offset"),
                end_offset=_int(raw, "end_offset"),
                records=_int(raw, "records"),
                min_event_ms=_opt_int(raw, "min_event_ms"),
                max_event_ms=_opt_int(raw, "max_event_ms"),
                min_ingest_ms=_opt_int(raw, "min_ingest_ms"),
                max_ingest_ms=_opt_int(raw, "max_ingest_ms"),
                size_bytes=_int(raw, "size_bytes"),
                crc32=_int(raw, "crc32"),
                archived_ms=_int(raw, "archived_ms"),
            )
        except (ValueError, AttributeError, KeyError, TypeError) as exc:
            if isinstance(exc, ManifestError):
                raise
            raise ManifestError(f"{where}: not a manifest entry ({exc})") from exc


def segment_name(base_offset: int) -> str:
    """``segment-<base_offset:020d>.log``."""
    return f"segment-{base_offset:020d}.log"


def _int(raw: dict[str, Any], name: str) -> int:
    value = raw[name]
    if type(value) is not int:
        raise ManifestError(f"{name} is {value!r}, not an integer")
    return value


def _opt_int(raw: dict[str, Any], name: str) -> int | None:
    return None if raw.get(name) is None else _int(raw, name)


def _str(raw: dict[str, Any], name: str) -> str:
    value = raw[name]
    if not isinstance(value, str):
        raise ManifestError(f"{name} is {value!r}, not a string")
    return value
