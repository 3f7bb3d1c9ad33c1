import itertools

import pytest

from solution import chunks, windows


def test_chunks_basic():
    assert list(chunks("abcdefg", 3)) == [("a", "b", "c"), ("d", "e", "f"), ("g",)]
    assert list(chunks(range(4), 2)) == [(0, 1), (2, 3)]
    assert list(chunks([], 3)) == []
    assert list(chunks([1], 5)) == [(1,)]


def test_chunks_pad():
    assert list(chunks([1, 2, 3], 2, pad=True, fill=0)) == [(1, 2), (3, 0)]
    assert list(chunks([1, 2, 3], 5, pad=True)) == [(1, 2, 3, None, None)]
    assert list(chunks([1, 2], 2, pad=True, fill=0)) == [(1, 2)]
    assert list(chunks([], 2, pad=True)) == []


def test_windows_basic():
    assert list(windows(range(5), 3)) == [(0, 1, 2), (1, 2, 3), (2, 3, 4)]
    assert list(windows(range(5), 5)) == [(0, 1, 2, 3, 4)]
    assert list(windows(range(4), 5)) == []
    assert list(windows([], 1)) == []
    assert list(windows("ab", 1)) == [("a",), ("b",)]


def test_windows_step():
    assert list(windows(range(6), 4, step=2)) == [(0, 1, 2, 3), (2, 3, 4, 5)]
    assert list(windows(range(7), 4, step=2)) == [(0, 1, 2, 3), (2, 3, 4, 5)]
    assert list(windows(range(6), 2, step=2)) == [(0, 1), (2, 3), (4, 5)]


def test_windows_step_larger_than_size():
    assert list(windows(range(7), 2, step=3)) == [(0, 1), (3, 4)]
    assert list(windows(range(8), 2, step=3)) == [(0, 1), (3, 4), (6, 7)]
    assert list(windows(range(10), 1, step=4)) == [(0,), (4,), (8,)]


def test_windows_against_slicing_oracle():
    for n in range(0, 12):
        data = list(range(n))
        for size in range(1, 6):
            for step in range(1, 7):
                expected = [tuple(data[i : i + size]) for i in range(0, n - size + 1, step)]
                assert list(windows(iter(data), size, step)) == expected, (n, size, step)


def test_infinite_inputs_and_laziness():
    assert list(itertools.islice(chunks(itertools.count(), 3), 2)) == [(0, 1, 2), (3, 4, 5)]
    assert list(itertools.islice(windows(itertools.count(), 2, step=5), 3)) == [(0, 1), (5, 6), (10, 11)]
    source = iter(range(100))
    it = windows(source, 3)
    assert next(it) == (0, 1, 2)
    assert next(source) == 3  # nothing beyond the first window was read
    source = iter(range(100))
    it = chunks(source, 4)
    assert next(it) == (0, 1, 2, 3)
    assert next(source) == 4


def test_returns_iterators():
    assert hasattr(chunks([1], 1), "__next__")
    assert hasattr(windows([1], 1), "__next__")


def test_errors_raised_at_call_time():
    with pytest.raises(ValueError):
        chunks([1, 2], 0)
    with pytest.raises(ValueError):
        windows([1, 2], 0)
    with pytest.raises(ValueError):
        windows([1, 2], 2, step=0)
    with pytest.raises(ValueError):
        windows(itertools.count(), -1)
