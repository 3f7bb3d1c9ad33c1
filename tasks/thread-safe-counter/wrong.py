import threading


class Counter:
    def __init__(self, initial: int = 0) -> None:
        self._value = initial
        self._waiting = 0
        self._changed = threading.Condition()

    def _add(self, delta: int) -> int:
        with self._changed:
            self._value += delta
            self._changed.notify()
            return self._value

    def increment(self, n: int = 1) -> int:
        if n < 0:
            raise ValueError("n must be >= 0")
        return self._add(n)

    def decrement(self, n: int = 1) -> int:
        if n < 0:
            raise ValueError("n must be >= 0")
        return self._add(-n)

    @property
    def value(self) -> int:
        with self._changed:
            return self._value

    def wait_for(self, target: int, timeout: float | None = None) -> bool:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0")
        with self._changed:
            self._waiting += 1
            try:
                return self._changed.wait_for(lambda: self._value >= target, timeout)
            finally:
                self._waiting -= 1

    @property
    def waiting(self) -> int:
        with self._changed:
            return self._waiting
