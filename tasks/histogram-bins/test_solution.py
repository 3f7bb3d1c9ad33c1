import math
import random
from bisect import bisect_right

import pytest

from solution import histogram


def oracle(values, bins, lo, hi):
    edges = [lo + (hi - lo) * i / bins for i in range(bins)] + [hi]
    counts = [0] * bins
    for v in values:
        if lo <= v <= hi:
            counts[min(bisect_right(edges, v) - 1, bins - 1)] += 1
    return counts, edges


def test_simple():
    counts, edges = histogram([0, 1, 2, 3, 4], 2)
    assert edges == [0, 2.0, 4]
    assert counts == [2, 3]


def test_last_bin_includes_upper_bound():
    counts, edges = histogram([0, 10], 5, bounds=(0, 10))
    assert counts == [1, 0, 0, 0, 1]
    assert edges == [0.0, 2.0, 4.0, 6.0, 8.0, 10]


def test_out_of_range_ignored():
    counts, _ = histogram([-1, 0, 5, 10, 10.0001, math.inf, -math.inf], 2, bounds=(0, 10))
    assert counts == [1, 2]


def test_single_distinct_value():
    counts, edges = histogram([3, 3, 3], 2)
    assert edges == [2.5, 3.0, 3.5]
    assert counts == [0, 3]


def test_edges_formula_exact():
    _, edges = histogram([], 10, bounds=(0, 1))
    assert edges == [0 + (1 - 0) * i / 10 for i in range(10)] + [1]
    _, edges = histogram([1.0], 3, bounds=(0.1, 0.7))
    assert edges == [0.1 + (0.7 - 0.1) * i / 3 for i in range(3)] + [0.7]


def test_values_on_edges_follow_returned_edges():
    counts, edges = histogram([0.3, 0.6, 0.7], 10, bounds=(0, 1))
    expected = [0] * 10
    for v in (0.3, 0.6, 0.7):
        expected[bisect_right(edges, v) - 1] += 1
    assert counts == expected
    for bins in range(1, 60):
        for lo, hi in [(0, 1), (0.1, 0.9), (-3.3, 7.7), (1e-3, 2e-3)]:
            _, edges = histogram([], bins, bounds=(lo, hi))
            counts, _ = histogram(edges, bins, bounds=(lo, hi))
            assert counts == [1] * (bins - 1) + [2], (bins, lo, hi)


def test_errors():
    with pytest.raises(ValueError):
        histogram([], 3)
    with pytest.raises(ValueError):
        histogram([1, math.inf], 3)
    with pytest.raises(ValueError):
        histogram([1, math.nan], 3, bounds=(0, 2))
    for bad in [0, -1, 2.0, True]:
        with pytest.raises(ValueError):
            histogram([1, 2], bad)
    for bounds in [(1, 1), (2, 1), (0, math.inf), (math.nan, 1)]:
        with pytest.raises(ValueError):
            histogram([1], 2, bounds=bounds)


def test_accepts_iterator():
    counts, _ = histogram(iter([1, 2, 3, 4]), 4)
    assert counts == [1, 1, 1, 1]


def test_random_against_oracle():
    rng = random.Random(31)
    for _ in range(200):
        bins = rng.randint(1, 25)
        lo = rng.choice([0, -1, 0.1, rng.uniform(-50, 50)])
        hi = lo + rng.choice([1, 0.7, 3.3, rng.uniform(0.001, 100)])
        grid = [lo + (hi - lo) * rng.randint(-2, 4 * bins + 2) / (4 * bins) for _ in range(40)]
        values = grid + [rng.uniform(lo - 1, hi + 1) for _ in range(40)]
        assert histogram(values, bins, bounds=(lo, hi)) == oracle(values, bins, lo, hi)
        values = [rng.uniform(-5, 5) for _ in range(rng.randint(2, 30))]
        if min(values) < max(values):
            assert histogram(values, bins) == oracle(values, bins, min(values), max(values))


def test_large_input():
    rng = random.Random(2)
    values = [rng.gauss(0, 1) for _ in range(200_000)]
    counts, edges = histogram(values, 1000, bounds=(-4, 4))
    assert sum(counts) == sum(1 for v in values if -4 <= v <= 4)
    assert counts == oracle(values, 1000, -4, 4)[0]
