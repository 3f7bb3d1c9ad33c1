import math


def primes_up_to(n: int) -> list[int]:
    if n < 2:
        return []
    sieve = bytearray([1]) * n
    sieve[0] = sieve[1] = 0
    for p in range(2, math.isqrt(n) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytes(len(range(p * p, n, p)))
    return [i for i, flag in enumerate(sieve) if flag]


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    for d in range(3, math.isqrt(n) + 1, 2):
        if n % d == 0:
            return False
    return True


def nth_prime(k: int) -> int:
    if k < 1:
        raise ValueError("k must be >= 1")
    bound = 16 if k < 6 else int(k * (math.log(k) + math.log(math.log(k)))) + 2
    return primes_up_to(bound)[k - 1]
