import time
from collections.abc import Callable

EPSILON = 1e-9


class TokenBucket:
    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        initial: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        tokens = capacity if initial is None else initial
        if not 0 <= tokens <= capacity:
            raise ValueError("initial must be between 0 and capacity")
        self._rate = float(rate)
        self._capacity = float(capacity)
        self._tokens = float(tokens)
        self._clock = clock
        self._sleep = sleep
        self._last = clock()

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def capacity(self) -> float:
        return self._capacity

    def _refill(self) -> float:
        now = self._clock()
        if now > self._last:
            self._tokens = min(self._capacity, self._tokens + (now - self._last) * self._rate)
            self._last = now
        return now

    def _check(self, tokens: float) -> None:
        if not 0 < tokens <= self._capacity:
            raise ValueError(f"request must be in (0, {self._capacity}], got {tokens}")

    def _take(self, tokens: float) -> bool:
        if self._tokens >= tokens - EPSILON:
            self._tokens = max(0.0, self._tokens - tokens)
            return True
        return False

    def _wait(self, tokens: float) -> float:
        if self._tokens >= tokens - EPSILON:
            return 0.0
        return (tokens - self._tokens) / self._rate

    def available(self) -> float:
        self._refill()
        return self._tokens

    def try_consume(self, tokens: float = 1.0) -> bool:
        self._check(tokens)
        self._refill()
        return self._take(tokens)

    def wait_time(self, tokens: float = 1.0) -> float:
        self._check(tokens)
        self._refill()
        return self._wait(tokens)

    def consume(self, tokens: float = 1.0, timeout: float | None = None) -> bool:
        self._check(tokens)
        now = self._refill()
        deadline = None if timeout is None else now + timeout
        while True:
            if self._take(tokens):
                return True
            wait = self._wait(tokens)
            if deadline is not None and now + wait > deadline:
                return False
            self._sleep(wait)
            now = self._refill()

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self._refill()
        self._rate = float(rate)
