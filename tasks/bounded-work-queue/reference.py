import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class QueueFull(Exception):
    pass


class Cancelled(Exception):
    pass


_PENDING, _RUNNING, _FINISHED, _CANCELLED = "pending", "running", "finished", "cancelled"


class Job:
    def __init__(self, owner: "WorkQueue", fn: Callable, args: tuple, kwargs: dict) -> None:
        self._owner = owner
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._state = _PENDING
        self._value: Any = None
        self._error: BaseException | None = None
        self._finished = threading.Event()
        self._callbacks: list[Callable[[Job], object]] = []

    def result(self, timeout: float | None = None) -> Any:
        if not self._finished.wait(timeout):
            raise TimeoutError("job not done in time")
        if self._state == _CANCELLED:
            raise Cancelled("job was cancelled")
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> bool:
        return self._owner._cancel(self)

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def done(self) -> bool:
        return self._finished.is_set()

    def add_done_callback(self, fn: Callable[["Job"], object]) -> None:
        with self._owner._lock:
            if not self._finished.is_set():
                self._callbacks.append(fn)
                return
        _call_quietly(fn, self)

    def _complete(self) -> None:
        """Mark done and run callbacks; the state was already set under the owner's lock."""
        with self._owner._lock:
            self._finished.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _call_quietly(fn, self)


def _call_quietly(fn: Callable[[Job], object], job: Job) -> None:
    try:
        fn(job)
    except Exception:
        pass  # A broken callback must not take a worker down with it.


class WorkQueue:
    def __init__(self, workers: int, max_pending: int) -> None:
        if workers < 1 or max_pending < 1:
            raise ValueError("workers and max_pending must be at least 1")
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[Job] = deque()
        self._running = 0
        self._closed = False
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for thread in self._threads:
            thread.start()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def submit(self, fn: Callable, /, *args: Any, timeout: float | None = None, **kwargs: Any) -> Job:
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be >= 0")
        job = Job(self, fn, args, kwargs)
        with self._changed:
            ok = self._changed.wait_for(lambda: self._closed or len(self._queue) < self._max_pending, timeout)
            if self._closed:
                raise RuntimeError("the work queue is shut down")
            if not ok:
                raise QueueFull("backlog is full")
            self._queue.append(job)
            self._changed.notify_all()
        return job

    def _cancel(self, job: Job) -> bool:
        with self._changed:
            if job._state == _CANCELLED:
                return True
            if job._state != _PENDING:
                return False
            job._state = _CANCELLED
            self._queue.remove(job)
            self._changed.notify_all()
        job._complete()
        return True

    def _work(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._closed)
                if not self._queue:
                    return
                job = self._queue.popleft()
                job._state = _RUNNING
                self._running += 1
                self._changed.notify_all()
            try:
                job._value = job._fn(*job._args, **job._kwargs)
            except BaseException as error:
                job._error = error
            with self._changed:
                job._state = _FINISHED
                self._running -= 1
            job._complete()

    def shutdown(self, *, wait: bool = True, cancel_pending: bool = False) -> None:
        with self._changed:
            self._closed = True
            doomed = list(self._queue) if cancel_pending else []
            self._changed.notify_all()
        for job in doomed:
            self._cancel(job)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def __enter__(self) -> "WorkQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)
