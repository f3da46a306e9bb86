"""Key extractors and the hashing of keys into key intervals.

A consumer declares, per input stream, how to get the key it processes a
record under. Extractors are named by strings in the topology:

- ``key``: the record's key as sent;
- ``json:FIELD``: field ``FIELD`` of the JSON object in the value (strings as
  UTF-8, other values as their JSON text);
- ``py:MODULE:FUNCTION``: ``FUNCTION(key: bytes, value: bytes) -> bytes``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import mul, rshift
from typing import Any

import msgspec
from xxhash import xxh3_64_intdigest

from millrace.computations._serde import JsonSerde
from millrace.dataplane import json_field_keys

KeyExtractor = Callable[[bytes, bytes], bytes]

_HASH_SPACE = 1 << 64
_JSON_VALUE = JsonSerde()

FORMER_TOP_LEVEL = frozenset({
    "computations", "dataflow", "delivery", "deployment", "engine", "injector", "node",
    "sinks", "spark_jobs", "statestore",
})  # fmt: skip
"""Millrace's packages that were importable at the top level before they moved under
``millrace.``: a topology written then names ``dataflow:WindowedAggregation``."""


def key_hash(key: bytes) -> int:
    """A 64-bit hash of a key (xxh3), the same in every process and on every machine."""
    return xxh3_64_intdigest(key)


def interval_of(key: bytes, count: int) -> int:
    """The index of the key interval (of ``count`` equal ranges) that owns ``key``."""
    return (key_hash(key) * count) >> 64


def intervals_of(keys: Iterable[bytes], count: int) -> list[int]:
    """:func:`interval_of` of each key, in C-level passes (no Python step per key)."""
    hashes = map(xxh3_64_intdigest, keys)
    return list(map(rshift, map(mul, hashes, repeat(count)), repeat(64)))


def import_object(path: str, *, what: str) -> object:
    """``module:name`` resolved to the object, as a topology's ``handler`` and ``py:``
    key extractors are (for computations that take functions from their ``params``);
    ValueError naming ``what`` otherwise."""
    module_name, _, name = path.rpartition(":")
    if not module_name or not name:
        raise ValueError(f"{what} must be written module:name")
    try:
        found: object = getattr(importlib.import_module(_current_name(module_name)), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what} cannot be imported: {exc}") from exc
    return found


def _current_name(module_name: str) -> str:
    """``module_name``, or ``millrace.`` + it when it names one of Millrace's own packages
    by its former top-level name (``dataflow``): unless a module of the user's own has
    that name, which wins. Never the package's folder seen from a checkout's root as a
    second copy of it (two copies of a class are two classes)."""
    top = module_name.partition(".")[0]
    if top not in FORMER_TOP_LEVEL:
        return module_name
    found = importlib.util.find_spec(top)
    if found is not None and found.origin is not None:
        ours = importlib.util.find_spec(f"millrace.{top}")
        if ours is None or ours.origin is None or not _same_file(found.origin, ours.origin):
            return module_name  # the user's own module of that name
    return f"millrace.{module_name}"


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _record_key(key: bytes, value: bytes) -> bytes:
    return key


class _JsonField:
    """``json:FIELD``. msgspec reads only the field (the rest skipped, not built: a
    third of ``json.loads``'s time); anything it refuses, and a value that is not valid
    UTF-8 (which it does not check in the parts it skips), takes ``json.loads``, so
    keys and errors are ``json.loads``'s. Pickled as its field name (a backfill ships
    extractors to Spark's workers; msgspec's decoder does not pickle)."""

    def __init__(self, field: str) -> None:
        self.field = field
        self._only_field: Callable[[bytes], Any] = msgspec.json.Decoder(
            msgspec.defstruct("KeyField", [("found", msgspec.Raw)], rename={"found": field})
        ).decode

    def __reduce__(self) -> tuple[type[_JsonField], tuple[str]]:
        return (_JsonField, (self.field,))

    def _exact(self, value: bytes) -> bytes:
        found = json.loads(value)[self.field]
        return found.encode() if isinstance(found, str) else json.dumps(found).encode()

    def many(self, values: list[bytes]) -> list[bytes | None]:
        """The keys of a batch's values read natively (``native/core/src/json_keys.rs``)
        where their reading is plain; None where this extractor's own call decides (and
        says what is wrong)."""
        return json_field_keys(values, self.field)

    def __call__(self, key: bytes, value: bytes) -> bytes:
        try:
            raw = self._only_field(value).found
            if not value.isascii():
                value.decode()
        except Exception:  # json.loads decides, and says what is wrong
            return self._exact(value)
        found = _JSON_VALUE.loads(bytes(raw))
        return found.encode() if isinstance(found, str) else json.dumps(found).encode()


def load_key_extractor(spec: str) -> KeyExtractor:
    """Resolve an extractor spec; raises ValueError naming what is wrong."""
    if spec == "key":
        return _record_key
    if spec.startswith("json:") and len(spec) > len("json:"):
        return _JsonField(spec[len("json:") :])
    if spec.startswith("py:"):
        function = import_object(spec[len("py:") :], what=f"key extractor {spec!r}")
        if not callable(function):
            raise ValueError(f"key extractor {spec!r} is not callable")
        extractor: KeyExtractor = function
        return extractor
    raise ValueError(
        f"unknown key extractor {spec!r}: use 'key', 'json:FIELD' or 'py:MODULE:FUNCTION'"
    )
