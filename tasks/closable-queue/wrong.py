import threading
import time
from collections import deque
from collections.abc import Iterator


class Closed(Exception):
    pass


class ClosableQueue:
    def __init__(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ValueError("maxsize must be an int >= 1")
        self._maxsize = maxsize
        self._items: deque[object] = deque()
        self._closed = False
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._getters = self._putters = 0

    @staticmethod
    def _deadline(timeout: float | None) -> float | None:
        if timeout is None:
            return None
        if timeout < 0:
            raise ValueError("timeout must be >= 0")
        return time.monotonic() + timeout

    @staticmethod
    def _wait(condition: threading.Condition, deadline: float | None) -> None:
        if deadline is None:
            condition.wait()
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("queue operation timed out")
        condition.wait(remaining)

    def put(self, item: object, timeout: float | None = None) -> None:
        deadline = self._deadline(timeout)
        with self._lock:
            while True:
                if self._closed:
                    raise Closed("queue is closed")
                if len(self._items) < self._maxsize:
                    break
                self._putters += 1
                try:
                    self._wait(self._not_full, deadline)
                finally:
                    self._putters -= 1
            self._items.append(item)
            self._not_empty.notify()

    def get(self, timeout: float | None = None) -> object:
        deadline = self._deadline(timeout)
        with self._lock:
            while not self._items:
                if self._closed:
                    raise Closed("queue is closed and drained")
                self._getters += 1
                try:
                    self._wait(self._not_empty, deadline)
                finally:
                    self._getters -= 1
            item = self._items.popleft()
            self._not_full.notify()
            return item

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._not_empty.notify()
            self._not_full.notify()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[object]:
        while True:
            try:
                yield self.get()
            except Closed:
                return

    @property
    def getters_waiting(self) -> int:
        with self._lock:
            return self._getters

    @property
    def putters_waiting(self) -> int:
        with self._lock:
            return self._putters
