import time
from collections.abc import Callable


class Stopwatch:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._banked = 0.0  # running time of finished runs
        self._started_at: float | None = None
        self._lap_mark = 0.0  # value of `elapsed` at the previous lap
        self._laps: list[float] = []

    @property
    def running(self) -> bool:
        return self._started_at is not None

    @property
    def elapsed(self) -> float:
        if self._started_at is None:
            return self._banked
        return self._banked + (self._clock() - self._started_at)

    @property
    def laps(self) -> list[float]:
        return list(self._laps)

    def start(self) -> None:
        if self.running:
            raise RuntimeError("stopwatch is already running")
        self._started_at = self._clock()

    def stop(self) -> float:
        if not self.running:
            raise RuntimeError("stopwatch is not running")
        self._banked = self.elapsed
        self._started_at = None
        return self._banked

    def lap(self) -> float:
        if not self.running:
            raise RuntimeError("lap() needs a running stopwatch")
        now = self.elapsed
        lap = now - self._lap_mark
        self._lap_mark = now
        self._laps.append(lap)
        return lap

    def reset(self) -> None:
        self._banked = 0.0
        self._started_at = None
        self._lap_mark = 0.0
        self._laps = []

    def __enter__(self) -> "Stopwatch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.running:
            self.stop()
