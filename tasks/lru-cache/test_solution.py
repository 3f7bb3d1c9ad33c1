import random

import pytest

from solution import LRUCache


class Oracle:
    """Plain-list model of an LRU cache: index 0 is the least recently used."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = []
        self.evicted = []

    def _find(self, key):
        for i, (k, _) in enumerate(self.entries):
            if k == key:
                return i
        return -1

    def get(self, key):
        i = self._find(key)
        if i < 0:
            return "MISSING"
        entry = self.entries.pop(i)
        self.entries.append(entry)
        return entry[1]

    def peek(self, key):
        i = self._find(key)
        return "MISSING" if i < 0 else self.entries[i][1]

    def put(self, key, value):
        i = self._find(key)
        if i >= 0:
            self.entries.pop(i)
        elif len(self.entries) >= self.capacity:
            self.evicted.append(self.entries.pop(0))
        self.entries.append((key, value))

    def delete(self, key):
        i = self._find(key)
        if i < 0:
            return False
        self.entries.pop(i)
        return True

    def resize(self, capacity):
        self.capacity = capacity
        while len(self.entries) > capacity:
            self.evicted.append(self.entries.pop(0))


def test_capacity_validation():
    for bad in (0, -3):
        with pytest.raises(ValueError):
            LRUCache(bad)
    cache = LRUCache(2)
    with pytest.raises(ValueError):
        cache.resize(0)
    assert cache.capacity == 2


def test_get_refreshes_and_lru_is_evicted():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "b" not in cache
    assert cache.keys() == ["a", "c"]


def test_update_refreshes_without_evicting():
    evicted = []
    cache = LRUCache(2, on_evict=lambda k, v: evicted.append((k, v)))
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    assert evicted == []
    assert cache.items() == [("b", 2), ("a", 10)]
    cache.put("c", 3)
    assert evicted == [("b", 2)]
    assert cache.items() == [("a", 10), ("c", 3)]


def test_peek_and_contains_do_not_refresh():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == 1
    assert "a" in cache
    cache.put("c", 3)
    assert cache.keys() == ["b", "c"]


def test_missing_keys_and_none_values():
    cache = LRUCache(3)
    assert cache.get("x") is None
    assert cache.get("x", "dflt") == "dflt"
    assert cache.peek("x", 0) == 0
    assert len(cache) == 0
    cache.put("n", None)
    assert cache.get("n", "dflt") is None
    assert "n" in cache


def test_on_evict_sees_entry_already_gone():
    seen = []

    def on_evict(key, value):
        seen.append((key, value, key in cache, len(cache)))

    cache = LRUCache(1, on_evict=on_evict)
    cache.put("a", 1)
    cache.put("b", 2)
    assert seen == [("a", 1, False, 0)]


def test_delete_does_not_call_on_evict():
    evicted = []
    cache = LRUCache(2, on_evict=lambda k, v: evicted.append(k))
    cache.put("a", 1)
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    assert evicted == [] and len(cache) == 0
    cache.put("b", 2)
    cache.put("c", 3)
    cache.put("d", 4)
    assert evicted == ["b"]


def test_resize_evicts_oldest_first():
    evicted = []
    cache = LRUCache(5, on_evict=lambda k, v: evicted.append(k))
    for key in "abcde":
        cache.put(key, key.upper())
    cache.get("a")
    cache.resize(2)
    assert evicted == ["b", "c", "d"]
    assert cache.keys() == ["e", "a"]
    cache.resize(4)
    cache.put("f", "F")
    cache.put("g", "G")
    assert evicted == ["b", "c", "d"]
    assert cache.capacity == 4 and len(cache) == 4


@pytest.mark.parametrize("seed", range(5))
def test_random_operations_against_oracle(seed):
    rng = random.Random(seed)
    capacity = rng.randint(1, 6)
    evicted = []
    cache = LRUCache(capacity, on_evict=lambda k, v: evicted.append((k, v)))
    oracle = Oracle(capacity)
    for step in range(2000):
        key = rng.randint(0, 9)
        r = rng.random()
        if r < 0.35:
            cache.put(key, step)
            oracle.put(key, step)
        elif r < 0.65:
            assert cache.get(key, "MISSING") == oracle.get(key)
        elif r < 0.75:
            assert cache.peek(key, "MISSING") == oracle.peek(key)
        elif r < 0.85:
            assert cache.delete(key) == oracle.delete(key)
        elif r < 0.9:
            new_capacity = rng.randint(1, 6)
            cache.resize(new_capacity)
            oracle.resize(new_capacity)
        else:
            assert (key in cache) == (oracle.peek(key) != "MISSING")
        assert cache.items() == oracle.entries
        assert evicted == oracle.evicted


def test_large_cache_is_fast():
    cache = LRUCache(50_000)
    rng = random.Random(3)
    for i in range(50_000):
        cache.put(i, i)
    hits = 0
    for _ in range(120_000):
        key = rng.randint(0, 80_000)
        if rng.random() < 0.5:
            hits += cache.get(key) is not None
        else:
            cache.put(key, key)
    assert len(cache) == 50_000
    assert hits > 0
    oldest = cache.keys()[0]
    assert cache.get(oldest) == oldest
    assert cache.keys()[-1] == oldest
