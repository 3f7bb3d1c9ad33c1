from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice


def chunks(iterable: Iterable, size: int, *, pad: bool = False, fill=None) -> Iterator[tuple]:
    if size < 1:
        raise ValueError("size must be >= 1")
    return _chunks(iter(iterable), size, pad, fill)


def _chunks(iterator: Iterator, size: int, pad: bool, fill) -> Iterator[tuple]:
    while chunk := tuple(islice(iterator, size)):
        if pad and len(chunk) < size:
            chunk += (fill,) * (size - len(chunk))
        yield chunk


def windows(iterable: Iterable, size: int, step: int = 1) -> Iterator[tuple]:
    if size < 1 or step < 1:
        raise ValueError("size and step must be >= 1")
    return _windows(iter(iterable), size, step)


def _windows(iterator: Iterator, size: int, step: int) -> Iterator[tuple]:
    window = deque(islice(iterator, size), maxlen=size)
    while len(window) == size:
        yield tuple(window)
        fresh = tuple(islice(iterator, min(step, size)))
        if len(fresh) < min(step, size):
            return
        window.extend(fresh)
