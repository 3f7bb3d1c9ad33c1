from collections.abc import Iterable
from math import gcd


def _check(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an int, got {type(value).__name__}")
    return value


def gcd_all(numbers: Iterable[int]) -> int:
    result = 0
    for number in numbers:
        result = gcd(result, _check(number))
    return result


def lcm_all(numbers: Iterable[int]) -> int:
    result = 1
    for number in numbers:
        number = _check(number)
        if number == 0 or result == 0:
            result = 0
        else:
            result = result * number // gcd(result, number)
    return result


def reduce_fraction(numerator: int, denominator: int) -> tuple[int, int]:
    _check(numerator)
    _check(denominator)
    if denominator == 0:
        raise ZeroDivisionError("denominator is zero")
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    divisor = gcd(numerator, denominator)
    return numerator // divisor, denominator // divisor
