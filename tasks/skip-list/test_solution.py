import bisect
import itertools
import random

import pytest

from solution import SkipList


class CountingLevels:
    def __init__(self, levels):
        self.levels = itertools.cycle(levels)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return next(self.levels)


def geometric(seed, max_level=16):
    rng = random.Random(seed)

    def level():
        h = 1
        while h < max_level and rng.random() < 0.5:
            h += 1
        return h

    return level


def test_max_level_validation():
    with pytest.raises(ValueError):
        SkipList(max_level=0)


def test_empty():
    sl = SkipList()
    assert len(sl) == 0 and list(sl) == [] and sl.items() == []
    assert sl.get(1) is None and 1 not in sl
    assert sl.rank(5) == 0 and sl.range() == []
    for fn in (sl.floor, sl.ceiling, sl.__getitem__, sl.__delitem__):
        with pytest.raises(KeyError):
            fn(1)
    for index in (0, -1):
        with pytest.raises(IndexError):
            sl.key_at(index)


def test_basic_map_operations():
    sl = SkipList(random_level=geometric(1))
    for key in [50, 10, 40, 20, 30]:
        sl[key] = str(key)
    sl[20] = "twenty"
    assert list(sl) == [10, 20, 30, 40, 50]
    assert sl[20] == "twenty" and sl.get(99, "none") == "none"
    del sl[40]
    assert sl.items() == [(10, "10"), (20, "twenty"), (30, "30"), (50, "50")]
    with pytest.raises(KeyError):
        del sl[40]
    assert 50 in sl and 40 not in sl and len(sl) == 4


def test_floor_ceiling_rank():
    sl = SkipList(random_level=geometric(2))
    for key in [10, 20, 30]:
        sl[key] = None
    assert sl.floor(20) == 20 and sl.floor(25) == 20 and sl.floor(99) == 30
    assert sl.ceiling(20) == 20 and sl.ceiling(11) == 20 and sl.ceiling(-5) == 10
    with pytest.raises(KeyError):
        sl.floor(9)
    with pytest.raises(KeyError):
        sl.ceiling(31)
    assert [sl.rank(k) for k in (5, 10, 15, 20, 30, 31)] == [0, 0, 1, 1, 2, 3]


def test_key_at_and_negative_indices():
    sl = SkipList(random_level=geometric(3))
    for key in "dbeac":
        sl[key] = key.upper()
    assert [sl.key_at(i) for i in range(5)] == list("abcde")
    assert sl.key_at(-1) == "e" and sl.key_at(-5) == "a"
    for bad in (5, -6, 100):
        with pytest.raises(IndexError):
            sl.key_at(bad)


def test_range():
    sl = SkipList(random_level=geometric(4))
    for key in range(0, 20, 2):
        sl[key] = key * key
    assert sl.range(3, 9) == [(4, 16), (6, 36), (8, 64)]
    assert sl.range(4, 8) == [(4, 16), (6, 36)]
    assert sl.range(None, 3) == [(0, 0), (2, 4)]
    assert sl.range(15, None) == [(16, 256), (18, 324)]
    assert sl.range(9, 9) == [] and sl.range(10, 2) == []
    assert len(sl.range()) == 10


def test_random_level_called_once_per_new_key():
    levels = CountingLevels([1, 3, 2])
    sl = SkipList(random_level=levels)
    for key in [5, 1, 9]:
        sl[key] = 0
    assert levels.calls == 3
    sl[5] = "again"
    sl[1] = "again"
    assert levels.calls == 3
    sl.get(5)
    sl.rank(3)
    sl.key_at(0)
    sl.floor(4)
    sl.range(0, 10)
    del sl[9]
    assert levels.calls == 3
    sl[9] = 1
    assert levels.calls == 4


@pytest.mark.parametrize(
    "levels, max_level",
    [([1], 32), ([32], 32), ([0, -4], 8), ([1, 7, 2, 100, 3], 6), ([5, 1], 4)],
)
def test_degenerate_levels(levels, max_level):
    sl = SkipList(random_level=CountingLevels(levels), max_level=max_level)
    rng = random.Random(sum(levels))
    oracle = {}
    for _ in range(400):
        key = rng.randint(0, 60)
        if rng.random() < 0.65:
            sl[key] = key
            oracle[key] = key
        elif key in oracle:
            del sl[key]
            del oracle[key]
    keys = sorted(oracle)
    assert list(sl) == keys
    assert [sl.key_at(i) for i in range(len(keys))] == keys
    assert [sl.rank(k) for k in range(-1, 62)] == [bisect.bisect_left(keys, k) for k in range(-1, 62)]


@pytest.mark.parametrize("seed", range(5))
def test_random_against_sorted_list(seed):
    rng = random.Random(seed)
    sl = SkipList(random_level=geometric(seed + 100, 12), max_level=12)
    keys = []
    values = {}
    for step in range(2500):
        key = rng.randint(0, 150)
        r = rng.random()
        if r < 0.4:
            if key not in values:
                bisect.insort(keys, key)
            values[key] = step
            sl[key] = step
        elif r < 0.6:
            if key in values:
                del sl[key]
                keys.remove(key)
                del values[key]
            else:
                with pytest.raises(KeyError):
                    del sl[key]
        elif r < 0.75:
            assert sl.rank(key) == bisect.bisect_left(keys, key)
        elif r < 0.9:
            if keys:
                i = rng.randrange(-len(keys), len(keys))
                assert sl.key_at(i) == keys[i]
        else:
            lo, hi = sorted((key, rng.randint(0, 150)))
            expected = [(k, values[k]) for k in keys[bisect.bisect_left(keys, lo) : bisect.bisect_left(keys, hi)]]
            assert sl.range(lo, hi) == expected
        assert len(sl) == len(keys)
    assert sl.items() == [(k, values[k]) for k in keys]


def test_large():
    sl = SkipList()
    rng = random.Random(7)
    keys = rng.sample(range(10**6), 15_000)
    for key in keys:
        sl[key] = -key
    keys.sort()
    for key in keys[::3]:
        del sl[key]
    remaining = [k for i, k in enumerate(keys) if i % 3]
    assert len(sl) == len(remaining)
    for _ in range(3000):
        i = rng.randrange(len(remaining))
        assert sl.key_at(i) == remaining[i]
        probe = rng.randrange(10**6)
        assert sl.rank(probe) == bisect.bisect_left(remaining, probe)
