import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class PoolTimeout(TimeoutError):
    pass


class PoolClosed(RuntimeError):
    pass


class ObjectPool(Generic[T]):
    def __init__(self, factory: Callable[[], T], max_size: int, *, reset: Callable[[T], None] | None = None) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._factory = factory
        self._reset = reset
        self._max = max_size
        self._cond = threading.Condition()
        self._idle: list[T] = []
        self._in_use: dict[int, T] = {}
        self._slots = 0
        self._waiting = 0
        self._closed = False

    @property
    def size(self) -> int:
        with self._cond:
            return len(self._idle) + len(self._in_use)

    @property
    def idle(self) -> int:
        with self._cond:
            return len(self._idle)

    @property
    def in_use(self) -> int:
        with self._cond:
            return len(self._in_use)

    @property
    def waiting(self) -> int:
        with self._cond:
            return self._waiting

    def acquire(self, timeout: float | None = None) -> T:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0")
        with self._cond:
            if self._closed:
                raise PoolClosed("pool is closed")
            self._waiting += 1
            try:
                ok = self._cond.wait_for(
                    lambda: self._closed or self._idle or self._slots < self._max, timeout
                )
            finally:
                self._waiting -= 1
            if self._closed:
                raise PoolClosed("pool is closed")
            if not ok:
                raise PoolTimeout("no object available")
            if self._idle:
                obj = self._idle.pop()
                self._in_use[id(obj)] = obj
                return obj
            self._slots += 1
        try:
            obj = self._factory()
        except BaseException:
            with self._cond:
                self._slots -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._in_use[id(obj)] = obj
        return obj

    def release(self, obj: T) -> None:
        with self._cond:
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
                with self._cond:
                    self._slots -= 1
                    self._cond.notify()
                raise
        with self._cond:
            if self._closed:
                self._slots -= 1
            else:
                self._idle.append(obj)
                self._cond.notify()

    @contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[T]:
        obj = self.acquire(timeout)
        try:
            yield obj
        finally:
            self.release(obj)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._slots -= len(self._idle)
            self._idle.clear()
            self._cond.notify_all()
