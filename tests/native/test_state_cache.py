"""The native state cache: a commit's changes written through, least recently used out."""

from __future__ import annotations

from millrace.dataplane import StateCache


def test_a_write_through_makes_its_key_most_recent_whether_cached_or_not() -> None:
    cache = StateCache(3)
    cache.update({b"a": b"1", b"b": b"2", b"c": None})
    cache.update({b"a": b"10"})  # cached: changed in place, now the most recent
    cache.update({b"d": b"4"})  # new: b, the least recent, goes
    assert b"b" not in cache and len(cache) == 3
    assert cache.get(b"a") == (True, b"10")
    assert cache.get(b"c") == (True, None), "an absent key is cached as absent"
    cache.update({b"a": None, b"e": b"5"})  # d was used least recently
    assert cache.get(b"a") == (True, None) and b"d" not in cache
    assert cache.lookup([b"e", b"zz"]) == ([b"5", None], [1])
