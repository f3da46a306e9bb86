"""The serde of window state: JSON, encoded by msgspec when the accumulator is plain.

A window's state is a small dict (``acc``, ``pane``, ``since``, ``fired``...)
encoded once per window touched in a batch; ``json``'s C encoder took ~3.7 us
for one, msgspec ~0.5 us. msgspec is only used where the combiner promises
plain accumulators (:attr:`~dataflow.Combiner.plain_accumulator`): for
anything else (a user's combiner) it would silently turn bytes, sets or
dataclasses into JSON that ``json`` refuses. Its output differs from ``json``'s
in form only (UTF-8 instead of ``\\u`` escapes, ``1e16`` for ``1e+16``) and decodes
to the same values, except NaN and infinities, which msgspec writes as
``null``: a value whose encoding holds ``null`` is encoded by ``json`` instead.
Both encodings are read by the same decoder, so state written by either is read
back by both versions.
"""

from __future__ import annotations

from typing import Any

import msgspec

from millrace.computations import JSON, JsonSerde, Serde

_ENCODE = msgspec.json.Encoder(order="sorted").encode


class _PlainStateSerde(JsonSerde):
    """JSON of plain values (dicts with str keys, lists, str, int, float, bool, None)."""

    def dumps(self, value: Any) -> bytes:
        try:
            encoded = _ENCODE(value)
        except (TypeError, ValueError, OverflowError):
            return super().dumps(value)  # json's encoding, or json's error
        if b"null" in encoded:
            return super().dumps(value)  # NaN or an infinity, which msgspec writes as null
        return encoded


PLAIN_STATE = _PlainStateSerde()


def window_state_serde(plain_accumulator: bool) -> Serde[Any]:
    """The serde of a window's state: msgspec's encoder when the combiner's
    accumulators are plain JSON values, else :data:`computations.JSON`."""
    return PLAIN_STATE if plain_accumulator else JSON
