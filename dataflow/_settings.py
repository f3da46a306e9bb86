"""Settings read strictly: a library computation refuses ``params`` it does not have,
and a subclass attribute that looks like a misspelled setting, naming the one meant.

Without this a typo (``windw = "session:5m"`` in a topology, ``allowed_latenes_ms``
on a subclass) silently kept the default.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Collection, Mapping
from typing import Any


def check_settings(owner: object, params: Mapping[str, Any], known: Collection[str]) -> None:
    """``ValueError`` naming every setting of ``params`` not in ``known``, and every
    attribute of ``owner``'s own subclasses (not the library's classes) that is not a
    setting but close to one; with the setting meant."""
    name = type(owner).__name__
    problems = [
        f"{name} has no setting {key!r}{_meant(key, known)} (params)"
        for key in sorted(set(params) - set(known))
    ]
    for klass in type(owner).__mro__:
        if klass.__module__.startswith(("dataflow.", "computations.")) or klass is object:
            break
        for attribute, value in vars(klass).items():
            if attribute.startswith("_") or attribute in known or _is_code(value):
                continue
            meant = difflib.get_close_matches(attribute, known, n=1, cutoff=0.8)
            if meant:
                problems.append(
                    f"{klass.__name__}.{attribute} is not a setting of {name} "
                    f"(did you mean {meant[0]!r}?)"
                )
    if problems:
        settings = ", ".join(sorted(known))
        raise ValueError("; ".join(problems) + f". Its settings: {settings}")


def _meant(key: str, known: Collection[str]) -> str:
    found = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _is_code(value: Any) -> bool:
    return inspect.isroutine(value) or isinstance(
        value, (property, staticmethod, classmethod, type)
    )
