"""SQL's operators and functions over JSON values, with SQL's NULL (None): what compiled
expressions call (``streamsql/_expressions.py``).

NULL in, NULL out for operators and functions; comparisons with a NULL are NULL
(unknown), and ``AND``/``OR``/``NOT`` use three-valued logic. Integers stay integers
(``/`` of two integers truncates toward zero, as Flink's ``BIGINT / BIGINT``);
``DECIMAL`` values are floats. A failure (a division by zero, a string where a number
is needed) raises :class:`SqlRuntimeError`: the record is retried, then dead-lettered
with the message.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any


class SqlRuntimeError(ValueError):
    """An expression failed on a record's values (the message says which)."""


def _number(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SqlRuntimeError(f"{what}: {value!r} is not a number")
    return value


def add(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return _number(a, "+") + _number(b, "+")


def sub(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return _number(a, "-") - _number(b, "-")


def mul(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return _number(a, "*") * _number(b, "*")


def div(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    a, b = _number(a, "/"), _number(b, "/")
    if b == 0:
        raise SqlRuntimeError(f"division by zero: {a!r} / {b!r}")
    if isinstance(a, int) and isinstance(b, int):
        quotient = abs(a) // abs(b)
        return quotient if (a < 0) == (b < 0) else -quotient
    return a / b


def mod(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    a, b = _number(a, "MOD"), _number(b, "MOD")
    if b == 0:
        raise SqlRuntimeError(f"division by zero: MOD({a!r}, {b!r})")
    return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else _int_mod(a, b)


def _int_mod(a: int, b: int) -> int:
    """The remainder with the dividend's sign (SQL's, Java's), not Python's."""
    remainder = abs(a) % abs(b)
    return remainder if a >= 0 else -remainder


def neg(a: Any) -> Any:
    return None if a is None else -_number(a, "-")


def _comparable(a: Any, b: Any, op: str) -> None:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return
    if type(a) is not type(b):
        raise SqlRuntimeError(f"cannot compare {a!r} {op} {b!r}")


def _comparison(compare: Callable[[Any, Any], Any], op: str) -> Callable[[Any, Any], Any]:
    """SQL's ``op``: NULL when either side is, an error for values of unlike kinds."""

    def comparison(a: Any, b: Any) -> bool | None:
        if a is None or b is None:
            return None
        _comparable(a, b, op)
        return bool(compare(a, b))

    comparison.__name__ = comparison.__qualname__ = f"sql_{compare.__name__}"
    return comparison


eq = _comparison(operator.eq, "=")
ne = _comparison(operator.ne, "<>")
lt = _comparison(operator.lt, "<")
le = _comparison(operator.le, "<=")
gt = _comparison(operator.gt, ">")
ge = _comparison(operator.ge, ">=")


def and_rest(a: Any, b: Any) -> bool | None:
    """``a AND b`` once ``a`` is known not to be FALSE."""
    if b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or_rest(a: Any, b: Any) -> bool | None:
    """``a OR b`` once ``a`` is known not to be TRUE."""
    if b is True:
        return True
    if a is None or b is None:
        return None
    return False


def not_(a: Any) -> bool | None:
    return None if a is None else not truth(a)


def truth(a: Any) -> bool | None:
    """A condition's value: TRUE, FALSE or NULL (None); anything else is an error."""
    if a is None or isinstance(a, bool):
        return a
    raise SqlRuntimeError(f"{a!r} is not a boolean")


def between(x: Any, low: Any, high: Any) -> bool | None:
    lower = ge(x, low)
    if lower is False:
        return False
    return and_rest(lower, le(x, high))


def in_(x: Any, values: list[Any]) -> bool | None:
    if x is None:
        return None
    unknown = False
    for value in values:
        found = eq(x, value)
        if found:
            return True
        unknown = unknown or found is None
    return None if unknown else False


@lru_cache(maxsize=256)
def _like_pattern(pattern: str, escape: str | None) -> re.Pattern[str]:
    parts, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            parts.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        parts.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(parts), re.DOTALL)


def like(x: Any, pattern: Any, escape: str | None = None) -> bool | None:
    if x is None or pattern is None:
        return None
    if not isinstance(x, str) or not isinstance(pattern, str):
        raise SqlRuntimeError(f"LIKE takes strings, not {x!r} and {pattern!r}")
    return _like_pattern(pattern, escape).fullmatch(x) is not None


def concat(*values: Any) -> Any:
    if any(v is None for v in values):
        return None
    return "".join(v if isinstance(v, str) else _text(v) for v in values)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise SqlRuntimeError(f"{what}: {value!r} is not a string")
    return value


def upper(a: Any) -> Any:
    return None if a is None else _string(a, "UPPER").upper()


def lower(a: Any) -> Any:
    return None if a is None else _string(a, "LOWER").lower()


def char_length(a: Any) -> Any:
    return None if a is None else len(_string(a, "CHAR_LENGTH"))


def trim(a: Any) -> Any:
    return None if a is None else _string(a, "TRIM").strip(" ")


def substring(a: Any, start: Any, length: Any = -1) -> Any:
    """SQL's 1-based ``SUBSTRING(s FROM start [FOR length])``."""
    if a is None or start is None or length is None:
        return None
    text = _string(a, "SUBSTRING")
    begin = max(int(_number(start, "SUBSTRING")) - 1, 0)
    if length == -1:
        return text[begin:]
    return text[begin : begin + max(int(_number(length, "SUBSTRING")), 0)]


def abs_(a: Any) -> Any:
    return None if a is None else abs(_number(a, "ABS"))


def floor(a: Any) -> Any:
    return None if a is None else math.floor(_number(a, "FLOOR"))


def ceil(a: Any) -> Any:
    return None if a is None else math.ceil(_number(a, "CEIL"))


def round_(a: Any, digits: Any = 0) -> Any:
    """SQL's ROUND: halves away from zero (not Python's to even)."""
    if a is None or digits is None:
        return None
    value, places = _number(a, "ROUND"), int(_number(digits, "ROUND"))
    if isinstance(value, int) and places >= 0:
        return value
    scale = 10.0**places
    rounded = math.floor(abs(value) * scale + 0.5) / scale
    rounded = rounded if value >= 0 else -rounded
    return int(rounded) if isinstance(value, int) else rounded


def power(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return float(_number(a, "POWER")) ** _number(b, "POWER")


def coalesce(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def nullif(a: Any, b: Any) -> Any:
    return None if eq(a, b) else a


def _to_int(a: Any) -> Any:
    if isinstance(a, bool):
        return int(a)
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        if not math.isfinite(a):
            raise SqlRuntimeError(f"CAST({a!r} AS BIGINT): not finite")
        return int(a)  # toward zero, as SQL's cast
    if isinstance(a, str):
        try:
            return int(a.strip())
        except ValueError:
            raise SqlRuntimeError(f"CAST({a!r} AS BIGINT): not an integer") from None
    raise SqlRuntimeError(f"CAST({a!r} AS BIGINT): not a number")


def _to_float(a: Any) -> Any:
    if isinstance(a, bool) or not isinstance(a, int | float | str):
        raise SqlRuntimeError(f"CAST({a!r} AS DOUBLE): not a number")
    try:
        return float(a)
    except ValueError:
        raise SqlRuntimeError(f"CAST({a!r} AS DOUBLE): not a number") from None


def _to_bool(a: Any) -> Any:
    if isinstance(a, bool):
        return a
    if isinstance(a, str) and a.strip().upper() in ("TRUE", "FALSE"):
        return a.strip().upper() == "TRUE"
    if isinstance(a, int | float):
        return a != 0
    raise SqlRuntimeError(f"CAST({a!r} AS BOOLEAN): not a boolean")


CASTS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "string": _text,
    "bool": _to_bool,
}


def cast(a: Any, kind: str) -> Any:
    """``CAST(a AS type)`` for the type's kind (``int``, ``float``, ``string``,
    ``bool``)."""
    return None if a is None else CASTS[kind](a)
