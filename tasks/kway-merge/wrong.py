import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class _Desc:
    """Wraps a key so the min-heap pops the largest key first when merging descending streams."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: "_Desc") -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


def merge_sorted(
    iterables: Iterable[Iterable[T]],
    key: Callable[[T], Any] | None = None,
    reverse: bool = False,
) -> Iterator[T]:
    keyfunc = key if key is not None else (lambda item: item)
    wrap = _Desc if reverse else (lambda k: k)

    def pull(index: int, iterator: Iterator[T], previous: Any, has_previous: bool) -> tuple | None:
        for item in iterator:
            k = keyfunc(item)
            if has_previous and (previous < k if reverse else k < previous):
                raise ValueError(f"input {index} is not sorted")
            return (wrap(k), item, index, k, iterator)
        return None

    heap = []
    for index, iterable in enumerate(iterables):
        entry = pull(index, iter(iterable), None, False)
        if entry is not None:
            heap.append(entry)
    heapq.heapify(heap)
    while heap:
        _, item, index, k, iterator = heap[0]
        yield item
        entry = pull(index, iterator, k, True)
        if entry is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, entry)
