import random

import pytest

from solution import Interval, IntervalTree


def brute_overlap(items, start, end):
    return [(s, e, d) for s, e, d, _ in sorted(items, key=lambda t: (t[0], t[1], t[3])) if s < end and start < e]


def brute_at(items, point):
    return [(s, e, d) for s, e, d, _ in sorted(items, key=lambda t: (t[0], t[1], t[3])) if s <= point < e]


def test_empty_tree():
    tree = IntervalTree()
    assert len(tree) == 0
    assert tree.overlap(0, 10) == []
    assert tree.at(3) == []
    assert list(tree) == []
    assert tree.delete(1, 2) is False


def test_invalid_intervals_raise():
    tree = IntervalTree()
    with pytest.raises(ValueError):
        tree.insert(5, 5)
    with pytest.raises(ValueError):
        tree.insert(6, 2)
    with pytest.raises(ValueError):
        tree.overlap(4, 4)
    assert len(tree) == 0


def test_half_open_boundaries():
    tree = IntervalTree()
    tree.insert(1, 3, "a")
    tree.insert(3, 5, "b")
    assert tree.overlap(3, 4) == [(3, 5, "b")]
    assert tree.overlap(0, 1) == []
    assert tree.overlap(2.5, 3) == [(1, 3, "a")]
    assert tree.overlap(0, 10) == [(1, 3, "a"), (3, 5, "b")]
    assert tree.at(3) == [(3, 5, "b")]
    assert tree.at(1) == [(1, 3, "a")]
    assert tree.at(5) == []
    assert tree.at(2.999) == [(1, 3, "a")]


def test_results_are_named_tuples_in_order():
    tree = IntervalTree()
    tree.insert(5, 9, {"room": 2})
    tree.insert(1, 4, {"room": 1})
    tree.insert(5, 7, {"room": 3})
    tree.insert(5, 9, {"room": 4})
    found = tree.overlap(0, 100)
    assert found == [(1, 4, {"room": 1}), (5, 7, {"room": 3}), (5, 9, {"room": 2}), (5, 9, {"room": 4})]
    assert isinstance(found[0], Interval)
    assert found[0].start == 1 and found[0].end == 4 and found[0].data == {"room": 1}
    assert list(tree) == found


def test_enclosing_and_enclosed_intervals():
    tree = IntervalTree()
    tree.insert(0, 100, "outer")
    tree.insert(40, 41, "inner")
    tree.insert(90, 200, "tail")
    assert [i.data for i in tree.overlap(50, 60)] == ["outer"]
    assert [i.data for i in tree.overlap(40, 95)] == ["outer", "inner", "tail"]
    assert [i.data for i in tree.at(40)] == ["outer", "inner"]
    assert [i.data for i in tree.at(150)] == ["tail"]


def test_duplicates_and_delete_earliest_copy():
    tree = IntervalTree()
    tree.insert(1, 5, "x")
    tree.insert(1, 5, "y")
    tree.insert(1, 5, "x")
    assert len(tree) == 3
    assert tree.delete(1, 5, "x") is True
    assert [i.data for i in tree] == ["y", "x"]
    assert tree.delete(1, 5, "z") is False
    assert tree.delete(1, 6, "y") is False
    assert tree.delete(1, 5, "y") is True
    assert tree.delete(1, 5, "x") is True
    assert tree.delete(1, 5, "x") is False
    assert len(tree) == 0 and tree.at(2) == []


@pytest.mark.parametrize("seed", range(5))
def test_random_against_brute_force(seed):
    rng = random.Random(seed)
    tree = IntervalTree()
    items = []
    seq = 0
    for _ in range(1500):
        r = rng.random()
        if r < 0.45 or not items:
            s = rng.randint(0, 60)
            e = s + rng.randint(1, 15)
            d = rng.choice("abc")
            seq += 1
            tree.insert(s, e, d)
            items.append((s, e, d, seq))
        elif r < 0.6:
            if rng.random() < 0.7:
                s, e, d, _ = rng.choice(items)
            else:
                s, e, d = rng.randint(0, 60), rng.randint(61, 80), "a"
            matches = [t for t in items if t[:3] == (s, e, d)]
            assert tree.delete(s, e, d) == bool(matches)
            if matches:
                items.remove(min(matches, key=lambda t: t[3]))
        elif r < 0.85:
            s = rng.randint(-5, 75)
            e = s + rng.randint(1, 20)
            assert tree.overlap(s, e) == brute_overlap(items, s, e)
        else:
            p = rng.choice([rng.randint(-2, 78), rng.uniform(-2, 78)])
            assert tree.at(p) == brute_at(items, p)
        assert len(tree) == len(items)
    assert list(tree) == brute_overlap(items, float("-inf"), float("inf"))


def test_sorted_insertion_stays_fast_and_correct():
    tree = IntervalTree()
    n = 20_000
    for i in range(n):
        tree.insert(i, i + 10, i)
    assert len(tree) == n
    for p in range(0, n, 7):
        got = [i.data for i in tree.at(p + 0.5)]
        assert got == list(range(max(0, p - 9), p + 1))
    for i in range(0, n, 2):
        assert tree.delete(i, i + 10, i)
    assert len(tree) == n // 2
    assert [i.data for i in tree.overlap(100, 104)] == [91, 93, 95, 97, 99, 101, 103]
    assert [i.data for i in tree.overlap(n + 8, n + 100)] == [n - 1]
