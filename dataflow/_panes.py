"""The value format of a windowed result (version 1, JSON).

One output record per pane (and, in retracting mode, one per retraction)::

    {"v": 1, "key": "alice", "window": [0, 60000], "pane": 0,
     "timing": "on_time", "retraction": false, "value": 42}

``key`` is the record key as UTF-8 text (``{"base64": ...}`` when it is not
valid UTF-8); ``window`` is ``[start, end)`` in ms; ``pane`` counts the
window's panes from 0 (a retraction carries the index of the pane it
retracts); ``timing`` is ``early``, ``on_time`` or ``late``; ``value`` is the
aggregate's result. The output record's key is the input key and its event
time the window's last instant (``end - 1``).

Every pane is strict JSON. A float of the value that is not finite (a sum that
overflowed, say) is written as the string ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``,
and the pane then carries ``"nonfinite": true``, so that :meth:`Pane.decode` reads
those strings back as floats (and only then: a string value stays a string).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

from millrace.computations import JSON, JsonSerde
from millrace.dataflow._outputs import finite, from_json_bytes, json_bytes
from millrace.dataflow._windows import Window

FORMAT_VERSION = 1
_ENCODING = JsonSerde(sort_keys=False)


class Timing(Enum):
    """When a pane fired, relative to the watermark passing the window's end."""

    EARLY = "early"
    ON_TIME = "on_time"
    LATE = "late"


@dataclass(frozen=True, slots=True)
class Pane:
    """One windowed result (or the retraction of one), decoded."""

    key: bytes
    window: Window
    index: int
    timing: Timing
    value: Any
    retraction: bool = False

    def encode(self) -> bytes:
        """The record value (format version 1)."""
        body = {
            "v": FORMAT_VERSION,
            "key": json_bytes(self.key),
            "window": [self.window.start, self.window.end],
            "pane": self.index,
            "timing": self.timing.value,
            "retraction": self.retraction,
            "value": self.value,
        }
        encoded = _ENCODING.dumps(body)
        if b"Infinity" in encoded or b"NaN" in encoded:  # the usual pane has neither
            finite_value = finite(self.value)
            if finite_value is not self.value:
                body["value"], body["nonfinite"] = finite_value, True
                encoded = _ENCODING.dumps(body)
        return encoded

    @classmethod
    def decode(cls, data: bytes) -> Pane:
        """A record value written by :meth:`encode`."""
        body = JSON.loads(data)
        if body.get("v") != FORMAT_VERSION:
            raise ValueError(f"windowed result of format {body.get('v')!r}, not 1")
        raw = from_json_bytes(body["key"])
        start, end = body["window"]
        value = _floats(body["value"]) if body.get("nonfinite") else body["value"]
        return cls(
            raw, Window(start, end), body["pane"], Timing(body["timing"]), value,
            body["retraction"],
        )  # fmt: skip


_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _floats(value: Any) -> Any:
    """Inverse of :func:`_strict` (for a pane marked ``nonfinite``)."""
    if isinstance(value, str):
        return _NONFINITE.get(value, value)
    if isinstance(value, list):
        return [_floats(item) for item in value]
    if isinstance(value, dict):
        return {key: _floats(item) for key, item in value.items()}
    return value
