import heapq
import itertools
import random

import pytest

from solution import merge_sorted


class Counting:
    def __init__(self, iterable):
        self._it = iter(iterable)
        self.read = 0

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self._it)
        self.read += 1
        return item


def test_basic_merge():
    assert list(merge_sorted([[1, 4, 7], [2, 5, 8], [0, 3, 6, 9]])) == list(range(10))


def test_empty_inputs():
    assert list(merge_sorted([])) == []
    assert list(merge_sorted([[], [], []])) == []
    assert list(merge_sorted([[], [1], []])) == [1]


def test_stability_across_inputs():
    a = [(1, "a0"), (2, "a1"), (2, "a2")]
    b = [(1, "b0"), (2, "b1")]
    c = [(0, "c0"), (2, "c1")]
    got = list(merge_sorted([b, a, c], key=lambda t: t[0]))
    assert [t[1] for t in got] == ["c0", "b0", "a0", "b1", "a1", "a2", "c1"]


def test_non_comparable_items_with_key():
    a = [{"t": 1, "src": "a"}, {"t": 3, "src": "a"}]
    b = [{"t": 1, "src": "b"}, {"t": 2, "src": "b"}]
    got = list(merge_sorted([a, b], key=lambda d: d["t"]))
    assert [(d["t"], d["src"]) for d in got] == [(1, "a"), (1, "b"), (2, "b"), (3, "a")]


def test_reverse():
    got = list(merge_sorted([[9, 5, 1], [8, 5, 2], [10]], reverse=True))
    assert got == [10, 9, 8, 5, 5, 2, 1]
    a, b = [(5, "a"), (5, "a2"), (1, "a3")], [(5, "b"), (3, "b2")]
    got = list(merge_sorted([a, b], key=lambda t: t[0], reverse=True))
    assert [t[1] for t in got] == ["a", "a2", "b", "b2", "a3"]


def test_lazy_and_reads_at_most_one_ahead():
    sources = [Counting(range(i, 1000, 3)) for i in range(3)]
    merged = merge_sorted(sources)
    assert all(s.read == 0 for s in sources)
    taken = list(itertools.islice(merged, 10))
    assert taken == list(range(10))
    for i, s in enumerate(sources):
        yielded = sum(1 for x in taken if x % 3 == i)
        assert s.read <= yielded + 1


def test_infinite_inputs():
    evens = itertools.count(0, 2)
    odds = itertools.count(1, 2)
    assert list(itertools.islice(merge_sorted([evens, odds]), 7)) == [0, 1, 2, 3, 4, 5, 6]


def test_unsorted_input_detected_when_read():
    merged = merge_sorted([[1, 2, 0, 5], [3, 4]])
    assert next(merged) == 1
    with pytest.raises(ValueError):
        list(merged)
    with pytest.raises(ValueError):
        list(merge_sorted([[3, 2, 1]], reverse=False))
    with pytest.raises(ValueError):
        list(merge_sorted([[1, 2]], reverse=True))
    assert list(merge_sorted([[2, 2, 2], [2]])) == [2, 2, 2, 2]


def test_against_oracle_many_inputs():
    rng = random.Random(21)
    for _ in range(30):
        k = rng.randint(1, 300)
        inputs = [sorted((rng.randint(0, 50), i, j) for j in range(rng.randint(0, 8))) for i in range(k)]
        inputs = [[(v, i, j) for j, (v, i, _) in enumerate(inp)] for inp in inputs]
        got = list(merge_sorted(inputs, key=lambda t: t[0]))
        assert got == sorted((t for inp in inputs for t in inp), key=lambda t: (t[0], t[1], t[2]))
        got_rev = list(merge_sorted([inp[::-1] for inp in inputs], key=lambda t: t[0], reverse=True))
        assert [t[0] for t in got_rev] == sorted((t[0] for inp in inputs for t in inp), reverse=True)
        expected_rev = sorted((t for inp in inputs for t in inp), key=lambda t: (-t[0], t[1], -t[2]))
        assert got_rev == expected_rev


def test_matches_heapq_merge_on_plain_numbers():
    rng = random.Random(5)
    inputs = [sorted(rng.random() for _ in range(rng.randint(0, 50))) for _ in range(40)]
    assert list(merge_sorted(inputs)) == list(heapq.merge(*inputs))
