import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Event:
    callback: Callable[[], object]
    interval: float | None
    due: float
    seq: int


class Scheduler:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._events: dict[int, _Event] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._handles = itertools.count(1)
        self._seqs = itertools.count()

    def _queue(self, handle: int, due: float) -> None:
        event = self._events[handle]
        event.due, event.seq = due, next(self._seqs)
        heapq.heappush(self._heap, (due, event.seq, handle))

    def _add(self, due: float, callback: Callable[[], object], interval: float | None) -> int:
        handle = next(self._handles)
        self._events[handle] = _Event(callback, interval, due, -1)
        self._queue(handle, due)
        return handle

    def call_later(self, delay: float, callback: Callable[[], object]) -> int:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        return self._add(self._clock() + delay, callback, None)

    def call_every(self, interval: float, callback: Callable[[], object]) -> int:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        return self._add(self._clock() + interval, callback, interval)

    def cancel(self, handle: int) -> bool:
        # Heap entries of removed events are skipped lazily when popped.
        return self._events.pop(handle, None) is not None

    def reschedule(self, handle: int, delay: float) -> bool:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        if handle not in self._events:
            return False
        self._queue(handle, self._clock() + delay)
        return True

    def _is_live(self, entry: tuple[float, int, int]) -> bool:
        event = self._events.get(entry[2])
        return event is not None and event.seq == entry[1]

    def run_due(self) -> int:
        now = self._clock()
        limit = next(self._seqs)
        deferred = []
        ran = 0
        try:
            while self._heap and self._heap[0][0] < now:
                entry = heapq.heappop(self._heap)
                if not self._is_live(entry):
                    continue
                if entry[1] > limit:
                    deferred.append(entry)
                    continue
                due, _, handle = entry
                event = self._events[handle]
                if event.interval is None:
                    del self._events[handle]
                else:
                    steps = int((now - due) // event.interval) + 1
                    self._queue(handle, due + steps * event.interval)
                ran += 1
                event.callback()
        finally:
            for entry in deferred:
                heapq.heappush(self._heap, entry)
        return ran

    def next_due(self) -> float | None:
        while self._heap and not self._is_live(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._events)
