import random

import pytest

from solution import LFUCache


class Oracle:
    """Brute-force LFU: scan for the minimum (frequency, last use)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = {}  # key -> [value, freq, last_use]
        self.clock = 0

    def _use(self, key):
        self.clock += 1
        self.entries[key][1] += 1
        self.entries[key][2] = self.clock

    def victim(self):
        return min(self.entries, key=lambda k: (self.entries[k][1], self.entries[k][2]))

    def get(self, key):
        if key not in self.entries:
            return "MISSING"
        self._use(key)
        return self.entries[key][0]

    def put(self, key, value):
        if key in self.entries:
            self.entries[key][0] = value
            self._use(key)
            return
        if len(self.entries) >= self.capacity:
            del self.entries[self.victim()]
        self.clock += 1
        self.entries[key] = [value, 1, self.clock]

    def pop_lfu(self):
        key = self.victim()
        return key, self.entries.pop(key)[0]


def test_capacity_validation():
    with pytest.raises(ValueError):
        LFUCache(0)
    assert LFUCache(3).capacity == 3


def test_evicts_least_frequent():
    cache = LFUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert "b" not in cache
    assert cache.get("a") == 1 and cache.get("c") == 3


def test_tie_broken_by_least_recent_use():
    cache = LFUCache(3)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    cache.get("a")
    cache.get("b")
    cache.get("c")
    cache.get("a")  # a:3, b:2, c:2 ; b used before c
    cache.put("d", 4)
    assert "b" not in cache
    assert sorted(k for k in "acd" if k in cache) == ["a", "c", "d"]


def test_put_existing_counts_as_use():
    cache = LFUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    assert cache.frequency("a") == 2
    cache.put("c", 3)
    assert "b" not in cache
    assert cache.peek("a") == 10


def test_new_entry_is_not_evicted_by_its_own_insert():
    cache = LFUCache(2)
    cache.put("a", 1)
    cache.get("a")
    cache.put("b", 2)
    cache.put("c", 3)  # evicts b (freq 1), not c
    assert "b" not in cache and "c" in cache
    cache.put("d", 4)  # c has freq 1 and is least recent among freq-1 entries
    assert "c" not in cache and "a" in cache and "d" in cache


def test_peek_frequency_contains_are_not_uses():
    cache = LFUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    for _ in range(3):
        assert cache.peek("a") == 1
        assert "a" in cache
        assert cache.frequency("a") == 1
    cache.put("c", 3)
    assert "a" not in cache
    with pytest.raises(KeyError):
        cache.frequency("a")
    assert cache.get("zz", "dflt") == "dflt" and cache.peek("zz") is None


def test_delete_forgets_history_and_pop_lfu():
    cache = LFUCache(3)
    cache.put("a", 1)
    for _ in range(5):
        cache.get("a")
    cache.put("b", 2)
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    cache.put("a", 1)
    assert cache.frequency("a") == 1
    assert cache.pop_lfu() == ("b", 2)
    assert cache.pop_lfu() == ("a", 1)
    with pytest.raises(KeyError):
        cache.pop_lfu()
    assert len(cache) == 0


def test_delete_of_lowest_bucket_then_evict():
    cache = LFUCache(3)
    cache.put("x", 0)
    cache.put("y", 0)
    cache.get("y")
    cache.get("y")
    cache.put("z", 0)
    cache.get("z")
    cache.delete("x")  # the frequency-1 bucket is now empty
    assert cache.pop_lfu() == ("z", 0)
    assert cache.frequency("y") == 3


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_against_oracle(seed):
    rng = random.Random(seed)
    capacity = rng.randint(1, 5)
    cache = LFUCache(capacity)
    oracle = Oracle(capacity)
    for step in range(3000):
        key = rng.randint(0, 8)
        r = rng.random()
        if r < 0.4:
            cache.put(key, step)
            oracle.put(key, step)
        elif r < 0.75:
            assert cache.get(key, "MISSING") == oracle.get(key)
        elif r < 0.85:
            assert cache.delete(key) == (oracle.entries.pop(key, None) is not None)
        elif r < 0.9:
            if oracle.entries:
                assert cache.pop_lfu() == oracle.pop_lfu()
            else:
                with pytest.raises(KeyError):
                    cache.pop_lfu()
        else:
            if key in oracle.entries:
                assert cache.frequency(key) == oracle.entries[key][1]
            assert (key in cache) == (key in oracle.entries)
        assert len(cache) == len(oracle.entries)


def test_large_cache_is_fast():
    rng = random.Random(11)
    cache = LFUCache(20_000)
    for i in range(20_000):
        cache.put(i, i)
    for _ in range(150_000):
        key = rng.randint(0, 40_000) if rng.random() < 0.5 else int(rng.paretovariate(1.2) * 10)
        r = rng.random()
        if r < 0.6:
            cache.get(key)
        elif r < 0.95:
            cache.put(key, key)
        else:
            cache.delete(key)
    assert len(cache) <= 20_000
    key, value = cache.pop_lfu()
    assert key == value
