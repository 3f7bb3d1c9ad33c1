import bisect
import math
import random

import pytest

from solution import find, insertion_point


class Key:
    """Supports only `<`, and counts how often it is used."""

    comparisons = 0

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        Key.comparisons += 1
        return self.value < other.value

    def __eq__(self, other):
        raise TypeError("compare with < only")

    __le__ = __gt__ = __ge__ = __ne__ = __eq__
    __hash__ = None


def keys(values):
    return [Key(v) for v in values]


def test_examples_with_ints():
    assert insertion_point([1, 2, 3], 5) == 3
    assert insertion_point([1, 2, 3], 0) == 0
    assert insertion_point([], 5) == 0
    assert insertion_point([], 5, side="right") == 0
    assert insertion_point([1, 2, 2, 3], 2) == 1
    assert insertion_point([1, 2, 2, 3], 2, side="right") == 3
    assert find([1, 2, 2, 3], 2) == 1
    assert find([1, 3], 2) == -1
    assert find([], 2) == -1
    assert find([1, 3], 4) == -1


def test_only_less_than_is_used():
    items = keys([1, 3, 3, 3, 7, 9])
    assert insertion_point(items, Key(3)) == 1
    assert insertion_point(items, Key(3), side="right") == 4
    assert insertion_point(items, Key(10)) == 6
    assert insertion_point(items, Key(10), side="right") == 6
    assert find(items, Key(3)) == 1
    assert find(items, Key(9)) == 5
    assert find(items, Key(4)) == -1
    assert find(items, Key(0)) == -1


def test_bad_side():
    with pytest.raises(ValueError):
        insertion_point([1], 1, side="middle")


def test_against_bisect():
    rng = random.Random(17)
    for _ in range(500):
        values = sorted(rng.randint(0, 12) for _ in range(rng.randint(0, 15)))
        target = rng.randint(-1, 13)
        items = keys(values)
        assert insertion_point(items, Key(target)) == bisect.bisect_left(values, target)
        assert insertion_point(items, Key(target), side="right") == bisect.bisect_right(values, target)
        expected = values.index(target) if target in values else -1
        assert find(items, Key(target)) == expected


def test_all_equal_and_single():
    assert insertion_point([5] * 10, 5) == 0
    assert insertion_point([5] * 10, 5, side="right") == 10
    assert find([5] * 10, 5) == 0
    assert insertion_point([5], 6) == 1
    assert insertion_point([5], 5, side="right") == 1


def test_comparison_budget():
    n = 100_000
    items = keys(range(0, 2 * n, 2))
    budget = 2 * math.ceil(math.log2(n + 1)) + 2
    for target in [-5, 0, 1, 777, 2 * n - 2, 2 * n + 10]:
        for call in (
            lambda t: insertion_point(items, Key(t)),
            lambda t: insertion_point(items, Key(t), side="right"),
            lambda t: find(items, Key(t)),
        ):
            Key.comparisons = 0
            call(target)
            assert Key.comparisons <= budget, (target, Key.comparisons)


def test_works_on_tuples_and_ranges():
    assert insertion_point((1, 4, 9), 5) == 2
    assert insertion_point(range(0, 100, 10), 55) == 6
    assert find(range(0, 100, 10), 90) == 9
