from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def dedupe(items: Iterable[T], key: Callable[[T], object] | None = None, *, keep: str = "first") -> list[T]:
    if keep not in ("first", "last"):
        raise ValueError(f"keep must be 'first' or 'last', got {keep!r}")
    kept: dict = {}
    for item in items:
        k = item if key is None else key(item)
        if keep == "first":
            kept.setdefault(k, item)
        else:
            kept[k] = item
    return list(kept.values())
