import math
import random
from fractions import Fraction

import pytest

from solution import gcd_all, lcm_all, reduce_fraction


def test_gcd_examples():
    assert gcd_all([12, 18]) == 6
    assert gcd_all([-12, 18]) == 6
    assert gcd_all([-12, -18]) == 6
    assert gcd_all([0, 9]) == 9
    assert gcd_all([0, 0]) == 0
    assert gcd_all([]) == 0
    assert gcd_all([7]) == 7
    assert gcd_all([-7]) == 7


def test_lcm_examples():
    assert lcm_all([4, 6]) == 12
    assert lcm_all([-4, 6]) == 12
    assert lcm_all([-4, -6]) == 12
    assert lcm_all([-3]) == 3
    assert lcm_all([2, 3, -5]) == 30
    assert lcm_all([]) == 1
    assert lcm_all([5, 0, 3]) == 0


def test_generators_and_big_numbers():
    assert gcd_all(x * 2**200 for x in (6, 10, 14)) == 2**201
    assert lcm_all(iter(range(1, 21))) == 232792560
    assert lcm_all([2**127 - 1, 2**61 - 1]) == (2**127 - 1) * (2**61 - 1)


def test_reduce_fraction():
    assert reduce_fraction(6, 8) == (3, 4)
    assert reduce_fraction(6, -8) == (-3, 4)
    assert reduce_fraction(-6, -8) == (3, 4)
    assert reduce_fraction(-6, 8) == (-3, 4)
    assert reduce_fraction(0, -5) == (0, 1)
    assert reduce_fraction(7, 1) == (7, 1)


def test_zero_denominator():
    with pytest.raises(ZeroDivisionError):
        reduce_fraction(1, 0)
    with pytest.raises(ZeroDivisionError):
        reduce_fraction(0, 0)


def test_type_errors():
    for bad in ([1, 2.0], [True, 2], ["4", 2], [None]):
        with pytest.raises(TypeError):
            gcd_all(bad)
        with pytest.raises(TypeError):
            lcm_all(bad)
    with pytest.raises(TypeError):
        lcm_all([0, 2.5])
    with pytest.raises(TypeError):
        reduce_fraction(1.0, 2)
    with pytest.raises(TypeError):
        reduce_fraction(1, True)


def test_against_math_oracle():
    rng = random.Random(31)
    for _ in range(500):
        nums = [rng.randint(-60, 60) for _ in range(rng.randint(1, 5))]
        assert gcd_all(nums) == math.gcd(*nums)
        assert lcm_all(nums) == math.lcm(*nums)
        num, den = rng.randint(-100, 100), rng.choice([d for d in range(-30, 31) if d])
        got = reduce_fraction(num, den)
        f = Fraction(num, den)
        assert got == (f.numerator, f.denominator)
