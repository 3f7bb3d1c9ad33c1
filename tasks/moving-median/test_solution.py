import math
import random
import statistics

import pytest

from solution import MovingMedian, sliding_medians


def test_growing_then_sliding():
    m = MovingMedian(3)
    assert m.push(5) == 5.0
    assert m.push(1) == 3.0
    assert m.push(9) == 5.0
    assert m.push(2) == 2.0
    assert m.push(2) == 2.0
    assert len(m) == 3 and m.median() == 2.0


def test_even_window_uses_mean_of_middles():
    m = MovingMedian(2)
    assert m.push(1) == 1.0
    assert m.push(2) == 1.5
    assert m.push(4) == 3.0
    m = MovingMedian(4)
    for v in [10, -3, 7, 0]:
        last = m.push(v)
    assert last == 3.5


def test_result_is_float():
    m = MovingMedian(1)
    result = m.push(7)
    assert result == 7.0 and isinstance(result, float)
    assert isinstance(MovingMedian(2).push(3), float)


def test_window_of_one_tracks_last_value():
    m = MovingMedian(1)
    assert [m.push(v) for v in [3, -1, 8.5]] == [3.0, -1.0, 8.5]
    assert len(m) == 1


def test_duplicates_are_removed_one_at_a_time():
    m = MovingMedian(3)
    for v in [4, 4, 4, 1, 1]:
        m.push(v)
    assert m.median() == 1.0
    assert m.push(4) == 1.0
    assert m.push(4) == 4.0


def test_errors():
    for bad in [0, -2, 2.5, True, None]:
        with pytest.raises(ValueError):
            MovingMedian(bad)
    m = MovingMedian(3)
    with pytest.raises(ValueError):
        m.median()
    m.push(1)
    with pytest.raises(ValueError):
        m.push(float("nan"))
    assert len(m) == 1 and m.median() == 1.0
    assert m.push(math.inf) == math.inf


def test_infinities():
    m = MovingMedian(3)
    m.push(-math.inf)
    m.push(math.inf)
    assert m.push(0.0) == 0.0


def test_sliding_medians():
    assert sliding_medians([1, 3, 2, 6, 5], 3) == [2.0, 3.0, 5.0]
    assert sliding_medians([1, 2], 3) == []
    assert sliding_medians([], 1) == []
    assert sliding_medians(iter([4, 1, 3]), 2) == [2.5, 2.0]
    with pytest.raises(ValueError):
        sliding_medians([1], 0)


def test_against_statistics_median():
    rng = random.Random(17)
    for _ in range(40):
        window = rng.randint(1, 9)
        values = [rng.randint(-20, 20) for _ in range(rng.randint(1, 80))]
        m = MovingMedian(window)
        for i, v in enumerate(values):
            expected = statistics.median(values[max(0, i - window + 1) : i + 1])
            assert m.push(v) == expected
        expected_full = [statistics.median(values[i : i + window]) for i in range(len(values) - window + 1)]
        assert sliding_medians(values, window) == expected_full


def test_floats_against_oracle():
    rng = random.Random(4)
    values = [rng.uniform(-1000, 1000) for _ in range(500)]
    got = sliding_medians(values, 50)
    want = [statistics.median(values[i : i + 50]) for i in range(len(values) - 49)]
    assert got == want


def test_large_window_is_fast():
    rng = random.Random(1)
    values = [rng.random() for _ in range(30000)]
    result = sliding_medians(values, 5000)
    assert len(result) == 25001
    assert result[0] == statistics.median(values[:5000])
    assert result[-1] == statistics.median(values[-5000:])
