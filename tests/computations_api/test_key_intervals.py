"""Key intervals and layouts (``computations/_intervals.py``): halves nest, layouts
tile the hash space through any sequence of splits and merges, and every key is
routed to the one interval that holds it."""

from __future__ import annotations

import random

import pytest

from millrace.computations import KeyInterval, Layout, interval_of, key_hash
from millrace.computations._intervals import HASH_SPACE
from millrace.computations._keys import load_key_extractor
from millrace.engine import Route

KEYS = [b"key-%d" % i for i in range(2000)]


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8])
def test_the_base_layout_routes_as_interval_of(count: int) -> None:
    layout = Layout.base("c", count)
    assert layout.uniform == count
    for key in KEYS:
        interval = layout.interval_for(key)
        assert interval == KeyInterval("c", interval_of(key, count), count)
        assert interval.holds(key)
        assert interval.start <= key_hash(key) < interval.end


def test_halves_split_the_range_and_hold_each_key_of_it_once() -> None:
    whole = KeyInterval("c", 1, 3)
    low, high = whole.halves()
    assert (low, high) == (KeyInterval("c", 2, 6), KeyInterval("c", 3, 6))
    assert (low.start, low.end, high.end) == (whole.start, high.start, whole.end)
    for key in KEYS:
        assert whole.holds(key) == (low.holds(key) or high.holds(key))
        assert not (low.holds(key) and high.holds(key))
    assert low.whole(3) == high.whole(3) == whole
    assert low.other_half(3) == high and high.other_half(3) == low
    assert whole.whole(3) is None  # one of the computation's first intervals


@pytest.mark.parametrize("seed", range(5))
def test_any_sequence_of_splits_and_merges_keeps_a_tiling(seed: int) -> None:
    rng = random.Random(seed)
    base = rng.choice([1, 2, 3, 5])
    layout = Layout.base("c", base)
    for _ in range(60):
        interval = rng.choice(layout.intervals)
        if rng.random() < 0.55 and interval.count < 64 * base:
            layout = layout.split(interval)
        elif interval.whole(base) is not None and interval.other_half(base) in layout.intervals:
            layout = layout.merge(interval)
        for key in KEYS[:300]:
            holders = [i for i in layout if i.holds(key)]
            assert holders == [layout.interval_for(key)]
    while len(layout) > base:  # merges all the way back
        mergeable = [i for i in layout if i.whole(base) and i.other_half(base) in layout.intervals]
        layout = layout.merge(mergeable[0])
    assert layout == Layout.base("c", base)


def test_a_layout_that_does_not_tile_the_space_is_refused() -> None:
    low, high = KeyInterval("c", 0, 2).halves()
    with pytest.raises(ValueError, match="do not cover"):
        Layout("c", 2, [low, high])
    with pytest.raises(ValueError, match="gap or overlap"):
        Layout("c", 2, [KeyInterval("c", 0, 2), low, KeyInterval("c", 1, 2)])
    with pytest.raises(ValueError, match="no share"):
        Layout("c", 2, [KeyInterval("c", 0, 3), KeyInterval("c", 1, 3), KeyInterval("c", 2, 3)])
    layout = Layout.base("c", 2)
    with pytest.raises(ValueError, match="first intervals"):
        layout.merge(KeyInterval("c", 0, 2))
    with pytest.raises(ValueError, match="not an interval"):
        layout.split(low)
    split = layout.split(KeyInterval("c", 0, 2)).split(low)
    with pytest.raises(ValueError, match="is split"):
        split.merge(high)
    assert KeyInterval("c", 3, 4).end == HASH_SPACE


@pytest.mark.parametrize("base", [1, 2, 3, 5])
def test_ids_number_every_interval_once_and_the_first_by_their_index(base: int) -> None:
    seen = set()
    for count in (base, base * 2, base * 4, base * 8):
        for index in range(count):
            interval = KeyInterval("c", index, count)
            ident = interval.id(base)
            assert KeyInterval.of_id("c", ident, base) == interval
            if count == base:
                assert ident == index
            seen.add(ident)
    assert seen == set(range(base * 15))


@pytest.mark.parametrize("seed", range(3))
def test_the_routing_table_routes_as_the_layout(seed: int) -> None:
    rng = random.Random(seed)
    layout = Layout.base("c", 3)
    for _ in range(12):
        layout = layout.split(rng.choice(layout.intervals))
    finest, ids = layout.routing_table()
    for key in KEYS:
        assert ids[(key_hash(key) * finest) >> 64] == layout.interval_for(key).id(3)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("count", [1, 3])
def test_a_batch_routes_as_its_records_one_by_one(count: int, split: bool) -> None:
    """``Route.intervals_for`` (``json:FIELD`` keys read natively a batch at a time) ==
    ``Route.interval_for`` of each record, unkeyable values and split layouts too."""
    layout = Layout.base("c", count)
    if split:
        layout = layout.split(KeyInterval("c", 0, count))
    rng = random.Random(count)
    values = [b'{"k": %d, "x": "y"}' % rng.randrange(10**6) for _ in range(300)]
    values += [b'{"k": "u%d"}' % i for i in range(50)]
    values += [b'{"k": 1.5}', b"not json", b'{"x": 1}', b'{"k": [1]}', b'{"k": 1, "k": 2}']
    rng.shuffle(values)
    keys = [b"ignored"] * len(values)
    route = Route.to("c", count, load_key_extractor("json:k"), layout=layout)
    assert route.intervals_for(keys, values) == list(map(route.interval_for, keys, values))
