import random
from fractions import Fraction

import pytest

from solution import Rational

R = Rational


def test_normal_form():
    r = R(6, -8)
    assert (r.numerator, r.denominator) == (-3, 4)
    assert (R(-6, -8).numerator, R(-6, -8).denominator) == (3, 4)
    assert (R(0, -5).numerator, R(0, -5).denominator) == (0, 1)
    assert (R(7).numerator, R(7).denominator) == (7, 1)


def test_constructor_errors():
    with pytest.raises(ZeroDivisionError):
        R(1, 0)
    for bad in [(1.5, 2), (1, 2.0), ("1", 2), (True, 2), (1, False)]:
        with pytest.raises(TypeError):
            R(*bad)


def test_immutable():
    r = R(1, 2)
    with pytest.raises(Exception):
        r.numerator = 5
    with pytest.raises(Exception):
        r.denominator = 5
    assert (r.numerator, r.denominator) == (1, 2)


def test_arithmetic_with_ints():
    half = R(1, 2)
    assert half + 1 == R(3, 2) and 1 + half == R(3, 2)
    assert 1 - half == half and half - 1 == R(-1, 2)
    assert 3 * half == R(3, 2) and half * 3 == R(3, 2)
    assert 3 / half == 6 and half / 2 == R(1, 4)
    assert isinstance(1 + half, Rational) and isinstance(3 / half, Rational)
    assert -half == R(-1, 2) and abs(R(-1, 2)) == half
    with pytest.raises(ZeroDivisionError):
        half / 0
    with pytest.raises(ZeroDivisionError):
        half / R(0)
    with pytest.raises(ZeroDivisionError):
        1 / R(0, 3)


def test_power():
    assert R(2, 3) ** 3 == R(8, 27)
    assert R(-2, 3) ** -3 == R(-27, 8)
    assert R(5, 7) ** 0 == 1
    assert R(0) ** 0 == 1
    with pytest.raises(ZeroDivisionError):
        R(0) ** -1


def test_comparisons_and_hash():
    assert R(4, 2) == 2 and 2 == R(4, 2)
    assert R(1, 3) < R(1, 2) <= R(2, 4) and R(-1, 2) < 0 < R(1, 10**9)
    assert 1 > R(1, 2) and R(3, 2) >= 1
    assert (R(1, 2) == 0.5) is False and (R(1, 2) == "1/2") is False
    assert hash(R(10, 5)) == hash(2) and hash(R(1, 2)) == hash(R(-2, -4))
    assert len({R(1, 2), R(2, 4), R(3, 6), R(1, 3)}) == 2


def test_other_types_rejected():
    with pytest.raises(TypeError):
        R(1, 2) + 0.5
    with pytest.raises(TypeError):
        "x" * R(1, 2)
    with pytest.raises(TypeError):
        R(1, 2) < 0.7
    with pytest.raises(TypeError):
        R(1, 2) ** 0.5


def test_float_and_bool():
    assert float(R(1, 4)) == 0.25 and float(R(-1, 3)) == -1 / 3
    assert not R(0, 9) and R(-1, 9)


def test_str_repr():
    assert str(R(-3, 4)) == "-3/4" and str(R(3, -4)) == "-3/4"
    assert str(R(4, 2)) == "2" and str(R(0)) == "0"
    assert repr(R(6, -8)) == "Rational(-3, 4)"


def test_parse():
    assert R.parse("-6/8") == R(-3, 4)
    assert R.parse(" 10 ") == 10
    assert R.parse("+3/9") == R(1, 3)
    assert R.parse("0/5") == 0
    for bad in ["", "1/", "/2", "1 / 2", "1/-2", "1/+2", "a/b", "1.5", "1/2/3", "--1", "- 1"]:
        with pytest.raises(ValueError):
            R.parse(bad)
    with pytest.raises(ZeroDivisionError):
        R.parse("1/0")


@pytest.mark.parametrize(
    "n, d, text",
    [(1, 3, "0.(3)"), (1, 6, "0.1(6)"), (1, 7, "0.(142857)"), (-1, 2, "-0.5"), (22, 7, "3.(142857)"),
     (5, 1, "5"), (-7, 4, "-1.75"), (1, 12, "0.08(3)"), (0, 1, "0"), (-1, 3, "-0.(3)"), (1, 81, "0.(012345679)"),
     (3, 8, "0.375"), (-10, 5, "-2"), (1, 990, "0.0(01)")],
)
def test_decimal(n, d, text):
    assert R(n, d).decimal() == text


def test_against_fraction_oracle():
    rng = random.Random(5)

    def rand():
        return rng.randint(-30, 30), rng.choice([i for i in range(-12, 13) if i])

    for _ in range(300):
        (a, b), (c, d) = rand(), rand()
        x, y = R(a, b), R(c, d)
        fx, fy = Fraction(a, b), Fraction(c, d)
        for got, want in [(x + y, fx + fy), (x - y, fx - fy), (x * y, fx * fy)]:
            assert (got.numerator, got.denominator) == (want.numerator, want.denominator)
        if c:
            q = x / y
            assert (q.numerator, q.denominator) == ((fx / fy).numerator, (fx / fy).denominator)
        assert (x < y) == (fx < fy) and (x == y) == (fx == fy) and (x >= y) == (fx >= fy)
