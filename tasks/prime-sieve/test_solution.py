import random

import pytest

from solution import is_prime, nth_prime, primes_up_to


def slow_is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


def test_small_bounds():
    assert primes_up_to(13) == [2, 3, 5, 7, 11, 13]
    assert primes_up_to(12) == [2, 3, 5, 7, 11]
    assert primes_up_to(2) == [2]
    assert primes_up_to(3) == [2, 3]
    assert primes_up_to(1) == []
    assert primes_up_to(0) == []
    assert primes_up_to(-10) == []


def test_bound_is_inclusive_for_every_prime():
    for p in [5, 7, 97, 7919]:
        assert primes_up_to(p)[-1] == p


def test_against_trial_division():
    expected = [n for n in range(3000) if slow_is_prime(n)]
    assert primes_up_to(2999) == expected
    for n in range(-5, 3000):
        assert is_prime(n) == slow_is_prime(n), n


def test_large_sieve():
    primes = primes_up_to(2_000_000)
    assert len(primes) == 148933
    assert primes[-1] == 1999993
    assert len(primes_up_to(1_000_000)) == 78498


def test_is_prime_big():
    assert is_prime(1_000_000_000_039)
    assert not is_prime(1_000_000_000_037)
    assert is_prime(999_999_999_989)
    assert not is_prime(999_983 * 999_979)
    assert is_prime(2) and not is_prime(4) and not is_prime(1)


def test_nth_prime():
    assert [nth_prime(k) for k in range(1, 11)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert nth_prime(1000) == 7919
    assert nth_prime(10_000) == 104729
    assert nth_prime(100_000) == 1299709


def test_nth_prime_consistent():
    rng = random.Random(2)
    primes = primes_up_to(20000)
    for k in rng.sample(range(1, len(primes) + 1), 50):
        assert nth_prime(k) == primes[k - 1]


def test_nth_prime_errors():
    for k in [0, -1]:
        with pytest.raises(ValueError):
            nth_prime(k)
