import random

import pytest

from solution import IntervalSet


def make(*pairs):
    s = IntervalSet()
    for a, b in pairs:
        s.add(a, b)
    return s


def test_merge_overlapping_and_touching():
    s = make((1, 3), (3, 5))
    assert s.intervals() == [(1, 5)]
    s = make((10, 20), (1, 2), (5, 7), (6, 11))
    assert s.intervals() == [(1, 2), (5, 20)]
    s.add(2, 5)
    assert s.intervals() == [(1, 20)]


def test_add_covering_many():
    s = make((0, 1), (2, 3), (4, 5), (6, 7), (20, 30))
    s.add(1, 6)
    assert s.intervals() == [(0, 7), (20, 30)]
    s.add(-5, 100)
    assert s.intervals() == [(-5, 100)]


def test_remove_splits_and_trims():
    s = make((0, 10))
    s.remove(3, 5)
    assert s.intervals() == [(0, 3), (5, 10)]
    s.remove(9, 12)
    s.remove(-3, 1)
    assert s.intervals() == [(1, 3), (5, 9)]
    s.remove(3, 5)
    assert s.intervals() == [(1, 3), (5, 9)]
    s.remove(0, 100)
    assert s.intervals() == []


def test_contains_boundaries():
    s = make((1, 3), (-4, -2))
    assert [p for p in range(-6, 6) if s.contains(p)] == [-4, -3, 1, 2]


def test_overlaps():
    s = make((5, 10))
    assert s.overlaps(9, 12) and s.overlaps(0, 6) and s.overlaps(6, 7) and s.overlaps(0, 100)
    assert not s.overlaps(10, 12) and not s.overlaps(0, 5) and not s.overlaps(7, 7)
    assert not IntervalSet().overlaps(0, 10)


def test_gaps_and_total():
    s = make((2, 4), (6, 8))
    assert s.gaps(0, 10) == [(0, 2), (4, 6), (8, 10)]
    assert s.gaps(2, 8) == [(4, 6)]
    assert s.gaps(3, 7) == [(4, 6)]
    assert s.gaps(2, 4) == []
    assert s.gaps(5, 5) == []
    assert IntervalSet().gaps(-1, 1) == [(-1, 1)]
    assert s.total_length() == 4


def test_empty_intervals_change_nothing():
    s = make((1, 2))
    s.add(5, 5)
    s.remove(1, 1)
    assert s.intervals() == [(1, 2)]


def test_reversed_bounds():
    s = IntervalSet()
    for method in (s.add, s.remove, s.overlaps, s.gaps):
        with pytest.raises(ValueError):
            method(3, 2)


def test_intervals_returns_a_copy():
    s = make((1, 2))
    s.intervals().append((5, 6))
    assert s.intervals() == [(1, 2)]


def test_against_point_set_oracle():
    rng = random.Random(2024)
    for _ in range(60):
        s, points = IntervalSet(), set()
        for _ in range(40):
            a = rng.randint(-20, 20)
            b = a + rng.randint(0, 8)
            if rng.random() < 0.65:
                s.add(a, b)
                points |= set(range(a, b))
            else:
                s.remove(a, b)
                points -= set(range(a, b))
            expected, run = [], None
            for p in sorted(points):
                if run and run[1] == p:
                    run[1] = p + 1
                else:
                    run = [p, p + 1]
                    expected.append(run)
            assert s.intervals() == [tuple(r) for r in expected]
            assert s.total_length() == len(points)
            q = rng.randint(-25, 25)
            assert s.contains(q) == (q in points)
            qa = rng.randint(-25, 25)
            qb = qa + rng.randint(0, 6)
            assert s.overlaps(qa, qb) == any(p in points for p in range(qa, qb))
            gap_points = {p for g in s.gaps(qa, qb) for p in range(*g)}
            assert gap_points == set(range(qa, qb)) - points


def test_many_intervals_fast():
    s = IntervalSet()
    for i in range(20000):
        s.add(3 * i, 3 * i + 1)
    for i in range(20000):
        assert s.contains(3 * i) and not s.contains(3 * i + 1)
        s.overlaps(3 * i + 1, 3 * i + 3)
    for i in range(0, 20000, 2):
        s.add(3 * i + 1, 3 * i + 3)
    assert len(s.intervals()) == 10000
    assert s.total_length() == 20000 + 20000
