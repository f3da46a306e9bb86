"""Durations as a topology file writes them: milliseconds, or a number with a unit.

``60000``, ``"60000"``, ``"500ms"``, ``"90s"``, ``"1m"``, ``"1h"``, ``"7d"`` and
``"1.5s"`` (a whole number of milliseconds) are all accepted wherever a setting
is a duration (``window = "tumbling:1m"``, ``allowed_lateness_ms = "1h"``); anything
else is an error that names the setting and says what is accepted.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def duration_ms(value: object, what: str) -> int:
    """``value`` (an int of milliseconds, or a string as the module says) in whole
    milliseconds; ``ValueError`` naming ``what`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is not None:
        number, unit = match.groups()
        try:
            total = Decimal(number) * _UNITS_MS[unit or "ms"]
        except InvalidOperation:  # pragma: no cover - the pattern admits decimals only
            total = None
        if total is not None and total == total.to_integral_value():
            return int(total)
    raise ValueError(
        f"{what} {value!r}: expected milliseconds or a duration such as "
        '"500ms", "90s", "1m", "1h" or "7d"'
    )
