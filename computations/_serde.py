"""State serialization: bytes, JSON and protobuf. Never pickle.

A serde turns a state value into bytes and back. Pass one to
``ctx.get_state`` / ``ctx.put_state``; the default stores bytes as is.
"""

from __future__ import annotations

import json
from typing import Any, Generic, Protocol, TypeVar

from google.protobuf.message import Message

T = TypeVar("T")
M = TypeVar("M", bound=Message)


class Serde(Protocol[T]):
    """Converts state values to bytes and back."""

    def dumps(self, value: T) -> bytes:
        """Encode ``value``."""
        ...

    def loads(self, data: bytes) -> T:
        """Decode what :meth:`dumps` produced."""
        ...


class BytesSerde:
    """Values are already bytes."""

    def dumps(self, value: bytes) -> bytes:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"BytesSerde stores bytes, got {type(value).__name__}")
        return bytes(value)

    def loads(self, data: bytes) -> bytes:
        return data


class JsonSerde:
    """JSON values (dict, list, str, int, float, bool, None), encoded compactly."""

    # One encoder and decoder for every call: json.dumps and json.loads with options
    # build a new one each time, a microsecond per state access on hot paths.
    _encoder = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
    _decoder = json.JSONDecoder()

    def dumps(self, value: Any) -> bytes:
        return self._encoder.encode(value).encode()

    def loads(self, data: bytes) -> Any:
        try:
            return self._decoder.decode(data.decode())
        except ValueError:
            return json.loads(data)  # a BOM, UTF-16 or UTF-32 (json.loads detects them)


class ProtobufSerde(Generic[M]):
    """Protobuf messages of one type."""

    def __init__(self, message_type: type[M]) -> None:
        self.message_type = message_type

    def dumps(self, value: M) -> bytes:
        if not isinstance(value, self.message_type):
            raise TypeError(
                f"ProtobufSerde({self.message_type.__name__}) got {type(value).__name__}"
            )
        return value.SerializeToString(deterministic=True)

    def loads(self, data: bytes) -> M:
        message = self.message_type()
        message.ParseFromString(data)
        return message


BYTES = BytesSerde()
"""The default serde: bytes in, bytes out."""

JSON = JsonSerde()
"""JSON-compatible Python values."""
