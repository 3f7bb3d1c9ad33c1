import time
from collections.abc import Callable


class Stopwatch:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._banked = 0.0
        self._started_at: float | None = None
        self._last_lap_at: float | None = None
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
        if self._last_lap_at is None:
            self._last_lap_at = self._started_at

    def stop(self) -> float:
        if not self.running:
            raise RuntimeError("stopwatch is not running")
        self._banked = self.elapsed
        self._started_at = None
        return self._banked

    def lap(self) -> float:
        if not self.running:
            raise RuntimeError("lap() needs a running stopwatch")
        now = self._clock()
        lap = now - self._last_lap_at
        self._last_lap_at = now
        self._laps.append(lap)
        return lap

    def reset(self) -> None:
        self._banked = 0.0
        self._started_at = None
        self._last_lap_at = None
        self._laps = []

    def __enter__(self) -> "Stopwatch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.running:
            self.stop()
