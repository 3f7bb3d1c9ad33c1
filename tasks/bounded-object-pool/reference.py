import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class PoolTimeout(TimeoutError):
    pass


class PoolClosed(RuntimeError):
    pass


class _Waiter:
    __slots__ = ("event", "outcome", "obj")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.outcome: str | None = None  # "object", "create" or "closed"
        self.obj = None


class ObjectPool(Generic[T]):
    def __init__(self, factory: Callable[[], T], max_size: int, *, reset: Callable[[T], None] | None = None) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._factory = factory
        self._reset = reset
        self._max = max_size
        self._lock = threading.Lock()
        self._idle: list[T] = []
        self._in_use: dict[int, T] = {}
        self._slots = 0  # objects that exist or are being created, released or reset
        self._waiters: deque[_Waiter] = deque()
        self._closed = False

    @property
    def size(self) -> int:
        with self._lock:
            return len(self._idle) + len(self._in_use)

    @property
    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    @property
    def in_use(self) -> int:
        with self._lock:
            return len(self._in_use)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiters)

    def acquire(self, timeout: float | None = None) -> T:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0")
        with self._lock:
            if self._closed:
                raise PoolClosed("pool is closed")
            if self._idle:
                obj = self._idle.pop()
                self._in_use[id(obj)] = obj
                return obj
            if self._slots < self._max:
                self._slots += 1
                waiter = None
            elif timeout == 0:
                raise PoolTimeout("no object available")
            else:
                waiter = _Waiter()
                self._waiters.append(waiter)
        if waiter is not None:
            waiter.event.wait(timeout)
            with self._lock:
                if waiter.outcome is None:
                    self._waiters.remove(waiter)
                    raise PoolTimeout(f"no object available within {timeout} s")
            if waiter.outcome == "closed":
                raise PoolClosed("pool is closed")
            if waiter.outcome == "object":
                return waiter.obj
        return self._create()

    def _create(self) -> T:
        try:
            obj = self._factory()
        except BaseException:
            with self._lock:
                self._free_slot()
            raise
        with self._lock:
            self._in_use[id(obj)] = obj
        return obj

    def _free_slot(self) -> None:
        """Give a vacated slot to the longest waiter, or drop it; caller holds the lock."""
        if self._waiters and not self._closed:
            waiter = self._waiters.popleft()
            waiter.outcome = "create"
            waiter.event.set()
        else:
            self._slots -= 1

    def release(self, obj: T) -> None:
        with self._lock:
            if self._in_use.get(id(obj)) is not obj:
                raise ValueError("object is not checked out from this pool")
            del self._in_use[id(obj)]
            if self._closed:
                self._slots -= 1
                return
        if self._reset is not None:
            try:
                self._reset(obj)
            except BaseException:
                with self._lock:
                    self._free_slot()
                raise
        with self._lock:
            if self._closed:
                self._slots -= 1
            elif self._waiters:
                waiter = self._waiters.popleft()
                waiter.outcome = "object"
                waiter.obj = obj
                self._in_use[id(obj)] = obj
                waiter.event.set()
            else:
                self._idle.append(obj)

    @contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[T]:
        obj = self.acquire(timeout)
        try:
            yield obj
        finally:
            self.release(obj)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._slots -= len(self._idle)
            self._idle.clear()
            while self._waiters:
                waiter = self._waiters.popleft()
                waiter.outcome = "closed"
                waiter.event.set()
