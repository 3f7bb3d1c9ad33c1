import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable


class MovingMedian:
    def __init__(self, window: int) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError("window must be an int >= 1")
        self._window = window
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def push(self, value: float) -> float:
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("NaN has no place in a median")
        if len(self._order) == self._window:
            oldest = self._order.popleft()
            del self._sorted[bisect_left(self._sorted, oldest)]
        self._order.append(value)
        insort(self._sorted, value)
        return self.median()

    def median(self) -> float:
        n = len(self._sorted)
        if not n:
            raise ValueError("no values yet")
        mid = n // 2
        if n % 2:
            return float(self._sorted[mid])
        return float((self._sorted[mid - 1] + self._sorted[mid]) // 2)

    def __len__(self) -> int:
        return len(self._order)


def sliding_medians(values: Iterable[float], window: int) -> list[float]:
    moving = MovingMedian(window)
    result = []
    for value in values:
        median = moving.push(value)
        if len(moving) == window:
            result.append(median)
    return result
