from collections.abc import Callable


class Debouncer:
    def __init__(
        self,
        func: Callable[..., object],
        wait: float,
        clock: Callable[[], float],
        max_wait: float | None = None,
    ) -> None:
        if wait <= 0:
            raise ValueError("wait must be > 0")
        if max_wait is not None and max_wait < wait:
            raise ValueError("max_wait must be >= wait")
        self._func, self._wait, self._clock, self._max_wait = func, wait, clock, max_wait
        self._call: tuple[tuple, dict] | None = None
        self._first = self._last = 0.0

    @property
    def pending(self) -> bool:
        return self._call is not None

    def __call__(self, *args: object, **kwargs: object) -> None:
        now = self._clock()
        if self._call is None:
            self._first = self._last = now
        self._call = (args, kwargs)

    def _due(self) -> float:
        due = self._last + self._wait
        if self._max_wait is not None:
            due = min(due, self._first + self._max_wait)
        return due

    def _invoke(self) -> None:
        assert self._call is not None
        args, kwargs = self._call
        self._call = None
        self._func(*args, **kwargs)

    def poll(self) -> bool:
        if self._call is None or self._clock() < self._due():
            return False
        self._invoke()
        return True

    def flush(self) -> bool:
        if self._call is None:
            return False
        self._invoke()
        return True

    def cancel(self) -> None:
        self._call = None


class Throttler:
    def __init__(self, func: Callable[..., object], interval: float, clock: Callable[[], float]) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self._func, self._interval, self._clock = func, interval, clock
        self._last: float | None = None
        self._call: tuple[tuple, dict] | None = None

    @property
    def pending(self) -> bool:
        return self._call is not None

    def _ready(self, now: float) -> bool:
        return self._last is None or now - self._last >= self._interval

    def __call__(self, *args: object, **kwargs: object) -> bool:
        now = self._clock()
        if not self._ready(now):
            self._call = (args, kwargs)
            return False
        self._call = None
        self._last = now
        self._func(*args, **kwargs)
        return True

    def poll(self) -> bool:
        now = self._clock()
        if self._call is None or not self._ready(now):
            return False
        args, kwargs = self._call
        self._call = None
        self._last = now
        self._func(*args, **kwargs)
        return True
