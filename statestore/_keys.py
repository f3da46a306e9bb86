"""Byte layouts of the keys in each column family.

Integers are big-endian so that byte order is numeric order: RocksDB then
keeps dedup ids grouped by segment for range scans and range deletes.
"""

from __future__ import annotations

import struct

from millrace.statestore.types import TimeDomain

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_SIGN = 1 << 63

LEGACY_TIMER_ORDER = b"T"
"""Time-ordered timer entries, which earlier versions wrote beside each index entry
(the in-memory timer index replaced every reader of them); opening a store drops them."""
TIMER_INDEX = b"I"
META_RESERVED = b"\x00"
META_USER = b"u:"


def encode_time(time_ms: int) -> bytes:
    """Signed milliseconds as 8 bytes whose byte order is numeric order."""
    return _U64.pack(time_ms + _SIGN)


def decode_time(data: bytes) -> int:
    """Inverse of :func:`encode_time`."""
    value: int = _U64.unpack(data)[0]
    return value - _SIGN


def dedup_segment_prefix(segment: int) -> bytes:
    """The first key of a segment: all its ids sort between it and the next segment's."""
    return _U64.pack(segment)


def dedup_key(segment: int, chain: int, record_id: bytes) -> bytes:
    """Segment, filter index within the segment, record id."""
    return _U64.pack(segment) + _U16.pack(chain) + record_id


def split_dedup_key(key: bytes) -> tuple[int, int, bytes]:
    """Inverse of :func:`dedup_key`."""
    return _U64.unpack_from(key)[0], _U16.unpack_from(key, 8)[0], key[10:]


def _timer_identity(domain: TimeDomain, key: bytes, tag: str) -> bytes:
    return bytes((domain,)) + _U32.pack(len(key)) + key + tag.encode()


def timer_index_key(domain: TimeDomain, key: bytes, tag: str) -> bytes:
    """Index entry ``(domain, key, tag) -> time``: finds a timer to move or delete."""
    return TIMER_INDEX + _timer_identity(domain, key, tag)


def decode_timer_index_key(raw: bytes) -> tuple[TimeDomain, bytes, str]:
    """Inverse of :func:`timer_index_key`: ``(domain, key, tag)``."""
    at = len(TIMER_INDEX)
    key_len: int = _U32.unpack_from(raw, at + 1)[0]
    key_end = at + 5 + key_len
    return TimeDomain(raw[at]), raw[at + 5 : key_end], raw[key_end:].decode()


def user_meta_key(name: str) -> bytes:
    """Metadata names chosen by callers live apart from the store's own."""
    return META_USER + name.encode()


def reserved_meta_key(name: str) -> bytes:
    """The store's own metadata (epoch, format)."""
    return META_RESERVED + name.encode()


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))
