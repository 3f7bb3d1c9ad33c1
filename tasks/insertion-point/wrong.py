from collections.abc import Sequence


def insertion_point(items: Sequence, target, *, side: str = "left") -> int:
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    lo, hi = 0, len(items) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        goes_right = items[mid] < target if side == "left" else not target < items[mid]
        if goes_right:
            lo = mid + 1
        else:
            hi = mid
    return max(lo, 0)


def find(items: Sequence, target) -> int:
    index = insertion_point(items, target)
    if index < len(items) and not target < items[index] and not items[index] < target:
        return index
    return -1
