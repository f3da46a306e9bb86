"""Reading a TOML file's tables setting by setting, every problem named and kept.

:class:`SettingsTable` reads one table: each setting by its type (a missing required
one, one of the wrong type or one the table does not have is a problem naming the
table, suggesting the closest known name), so that a file's problems are reported
together. :func:`named_tables` reads ``[section.NAME]`` tables.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

REQUIRED: Any = object()
"""The default of a setting the table must have."""


class SettingsTable:
    """One table of the file, read setting by setting; each problem names the table."""

    def __init__(self, where: str, body: Any, known: Collection[str], problems: list[str]) -> None:
        self.where = where
        self.problems = problems
        self.body: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
        if not isinstance(body, Mapping):
            problems.append(f"{where} must be a table")
        for unknown in sorted(set(self.body) - set(known)):
            close = difflib.get_close_matches(unknown, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{where} has unknown setting {unknown!r}{hint}")

    def _value(self, name: str, default: Any) -> Any:
        if name not in self.body and default is REQUIRED:
            self.problems.append(f"{self.where} is missing setting {name!r}")
        return self.body.get(name, None if default is REQUIRED else default)

    def text(self, name: str, default: Any = REQUIRED) -> str | None:
        value = self._value(name, default)
        if value is None or isinstance(value, str):
            return value
        self.problems.append(f"{self.where} {name} must be a string, not {value!r}")
        return None

    def integer(self, name: str, *, default: Any = None, minimum: int = 0) -> int | None:
        value = self._value(name, default)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return value
        self.problems.append(f"{self.where} {name} must be an integer >= {minimum}, not {value!r}")
        return None

    def port(self, name: str) -> int | None:
        value = self.integer(name)
        if value is not None and value > 65535:
            self.problems.append(f"{self.where} {name} must be a port (0..65535), not {value}")
            return None
        return value

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self._value(name, default)
        if isinstance(value, bool):
            return value
        self.problems.append(f"{self.where} {name} must be true or false, not {value!r}")
        return default

    def integers(self, name: str, *, default: Any = REQUIRED) -> tuple[int, ...] | None:
        value = self._value(name, default)
        if value is None:
            return None
        if isinstance(value, list) and all(
            isinstance(item, int) and not isinstance(item, bool) for item in value
        ):
            return tuple(value)
        self.problems.append(f"{self.where} {name} must be an array of integers, not {value!r}")
        return None

    def names(self, name: str) -> tuple[str, ...] | None:
        value = self._value(name, None)
        if value is None:
            return None
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
        self.problems.append(f"{self.where} {name} must be an array of stream names, not {value!r}")
        return None

    def directories(self, name: str) -> dict[str, str]:
        value = self._value(name, {})
        if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            return {str(k): v for k, v in value.items()}
        self.problems.append(f"{self.where} {name} must be a table of stream = directory")
        return {}


def named_tables(
    raw: Mapping[str, Any], section: str, problems: list[str]
) -> list[tuple[str, Any]]:
    """The ``[section.NAME]`` tables of ``raw`` as (NAME, body)."""
    tables = raw.get(section, {})
    if not isinstance(tables, Mapping):
        problems.append(f"[{section}] must hold one table per name ([{section}.NAME])")
        return []
    return [(str(name), body) for name, body in tables.items()]


def tables_of(value: Any) -> list[dict[str, Any]]:
    """The tables among the values of ``value`` (none when it is not a table)."""
    return (
        [body for body in value.values() if isinstance(body, dict)]
        if isinstance(value, dict)
        else []
    )
