from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


class _Seen:
    """Maps keys to slots: a dict for hashable keys, a list scanned with == for the rest."""

    def __init__(self) -> None:
        self._hashable: dict = {}
        self._other: list[tuple[object, int]] = []

    def get(self, key: object) -> int | None:
        try:
            return self._hashable.get(key)
        except TypeError:
            return next((slot for stored, slot in self._other if stored == key), None)

    def add(self, key: object, slot: int) -> None:
        try:
            self._hashable[key] = slot
        except TypeError:
            self._other.append((key, slot))


def dedupe(items: Iterable[T], key: Callable[[T], object] | None = None, *, keep: str = "first") -> list[T]:
    if keep not in ("first", "last"):
        raise ValueError(f"keep must be 'first' or 'last', got {keep!r}")
    values = list(items)
    seen = _Seen()
    chosen: list[int] = []  # one input position per distinct key
    for position, item in enumerate(values):
        k = item if key is None else key(item)
        slot = seen.get(k)
        if slot is None:
            seen.add(k, len(chosen))
            chosen.append(position)
        elif keep == "last":
            chosen[slot] = position
    return [values[p] for p in sorted(chosen)]
