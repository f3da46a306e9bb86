"""Key extractors survive pickling: a backfill ships the topology's extractors to
Spark's workers (stop 35's ``json:FIELD`` held a msgspec decoder, which does not
pickle, and every backfill of a topology using it failed before Spark ran a task)."""

from __future__ import annotations

import pickle

import pytest

from millrace.computations._keys import load_key_extractor


@pytest.mark.parametrize("spec", ["key", "json:page", "json:a b", "py:millrace.streamsql:no_key"])
def test_every_kind_of_extractor_pickles_and_extracts_the_same(spec: str) -> None:
    extractor = load_key_extractor(spec)
    again = pickle.loads(pickle.dumps(extractor))
    for value in (b'{"page": "/a", "a b": 3}', b'{"page": 7, "a b": "x"}'):
        assert again(b"k", value) == extractor(b"k", value)
