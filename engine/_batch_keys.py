"""Which key extractors key a batch's values at once (admission and routing ask)."""

from __future__ import annotations

from collections.abc import Callable

from millrace.computations import KeyExtractor

BatchKeys = Callable[[list[bytes]], list[bytes | None]]
"""The keys of a batch's values read at once; None where the extractor's own call
decides (and says what is wrong)."""


def batch_key_reader(extract: KeyExtractor) -> BatchKeys | None:
    """How ``extract`` keys a batch's values at once (``json:FIELD``: natively, its
    ``many``), or None for an extractor that keys one record at a time."""
    many: BatchKeys | None = getattr(extract, "many", None)
    return many
