"""``AuthorityJournal``: what the watermark authority journals (``watermarks.json``).

Published values, the newest epoch per interval and source watermarks: enough
to resume without ever publishing anything older. Read back with every value
checked (a malformed file is a :class:`JournalError` saying what is wrong) and
saturated into int64.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from millrace.computations import IntervalId
from millrace.engine import saturate


class JournalError(ValueError):
    """The watermark journal is not what :meth:`AuthorityJournal.to_json` writes."""


@dataclass(frozen=True, slots=True)
class AuthorityJournal:
    """What the authority journals (``watermarks.json``) to resume without ever
    publishing anything older: published values, the newest epoch per interval,
    source watermarks. Values are saturated into int64 when read."""

    published: dict[str, int]
    epochs: dict[IntervalId, int]
    sources: dict[str, int]

    def to_json(self) -> dict[str, object]:
        """The journal as JSON (``reports``: ``[computation, index, epoch, null]``)."""
        return {
            "published": dict(self.published),
            "reports": [[name, index, epoch, None] for (name, index), epoch in self.epochs.items()],
            "sources": dict(self.sources),
        }

    @classmethod
    def from_json(cls, data: object) -> AuthorityJournal:
        """Read :meth:`to_json` output back; :class:`JournalError` says what is wrong."""
        try:
            if not isinstance(data, Mapping):
                raise TypeError("not a JSON object")
            published = {str(n): saturate(int(v)) for n, v in data.get("published", {}).items()}
            epochs: dict[IntervalId, int] = {}
            for name, index, epoch, *_ in data.get("reports", []):
                key = IntervalId(str(name), int(index))
                epochs[key] = max(epochs.get(key, 0), int(epoch))
            sources = {str(n): saturate(int(v)) for n, v in data.get("sources", {}).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise JournalError(f"malformed watermark journal: {exc}") from exc
        return cls(published, epochs, sources)
