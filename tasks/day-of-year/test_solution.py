import datetime
import random

import pytest

from solution import day_of_year, days_between, from_day_of_year, is_leap


def test_leap_years():
    assert is_leap(2024) and is_leap(2000) and is_leap(4) and is_leap(400) and is_leap(100_000)
    assert not is_leap(2023) and not is_leap(1900) and not is_leap(2100) and not is_leap(1)
    assert [y for y in range(1896, 1912) if is_leap(y)] == [1896, 1904, 1908]


def test_day_of_year_examples():
    assert day_of_year(2023, 1, 1) == 1
    assert day_of_year(2023, 12, 31) == 365
    assert day_of_year(2024, 12, 31) == 366
    assert day_of_year(2024, 3, 1) == 61
    assert day_of_year(2000, 3, 1) == 61
    assert day_of_year(1900, 3, 1) == 60


def test_from_day_of_year_examples():
    assert from_day_of_year(2024, 60) == (2, 29)
    assert from_day_of_year(2023, 60) == (3, 1)
    assert from_day_of_year(2000, 366) == (12, 31)
    assert from_day_of_year(2023, 1) == (1, 1)


def test_days_between_examples():
    assert days_between((2024, 2, 28), (2024, 3, 1)) == 2
    assert days_between((2024, 3, 1), (2024, 2, 28)) == -2
    assert days_between((2023, 5, 5), (2023, 5, 5)) == 0
    assert days_between((1, 1, 1), (100_000, 12, 31)) == 36_524_249


def test_against_datetime():
    rng = random.Random(77)
    for _ in range(2000):
        a = datetime.date.fromordinal(rng.randint(1, datetime.date(9999, 12, 31).toordinal()))
        b = datetime.date.fromordinal(rng.randint(1, datetime.date(9999, 12, 31).toordinal()))
        assert is_leap(a.year) == (datetime.date(a.year, 12, 31).timetuple().tm_yday == 366)
        assert day_of_year(a.year, a.month, a.day) == a.timetuple().tm_yday
        assert from_day_of_year(a.year, a.timetuple().tm_yday) == (a.month, a.day)
        assert days_between((a.year, a.month, a.day), (b.year, b.month, b.day)) == (b - a).days


def test_400_year_cycle_beyond_datetime():
    rng = random.Random(8)
    for _ in range(200):
        year = rng.randint(1, 100_000 - 400)
        month = rng.randint(1, 12)
        day = rng.randint(1, 28)
        assert days_between((year, month, day), (year + 400, month, day)) == 146_097
        assert is_leap(year) == is_leap(year + 400)


def test_invalid_dates():
    for args in [(2023, 2, 29), (2024, 2, 30), (2024, 4, 31), (2024, 13, 1), (2024, 0, 1), (2024, 1, 0),
                 (0, 1, 1), (100_001, 1, 1), (-5, 1, 1), (1900, 2, 29)]:
        with pytest.raises(ValueError):
            day_of_year(*args)
    with pytest.raises(ValueError):
        days_between((2023, 2, 29), (2023, 3, 1))
    with pytest.raises(ValueError):
        days_between((2023, 3, 1), (0, 3, 1))


def test_invalid_ordinals_and_years():
    for year, ordinal in [(2023, 366), (2024, 367), (2024, 0), (1900, 366), (0, 1)]:
        with pytest.raises(ValueError):
            from_day_of_year(year, ordinal)
    for year in [0, -1, 100_001]:
        with pytest.raises(ValueError):
            is_leap(year)
    assert from_day_of_year(2000, 366) == (12, 31)
