import math
from bisect import bisect_right
from collections.abc import Iterable


def histogram(
    values: Iterable[float],
    bins: int,
    bounds: tuple[float, float] | None = None,
) -> tuple[list[int], list[float]]:
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ValueError("bins must be an int >= 1")
    data = list(values)
    if any(math.isnan(v) for v in data):
        raise ValueError("NaN in values")
    if bounds is None:
        if not data:
            raise ValueError("no values and no bounds")
        lo, hi = min(data), max(data)
        if math.isinf(lo) or math.isinf(hi):
            raise ValueError("infinite value and no bounds")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
    else:
        lo, hi = bounds
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"bad bounds {bounds!r}")
    edges = [lo + (hi - lo) * i / bins for i in range(bins)] + [hi]
    counts = [0] * bins
    for v in data:
        if v < lo or v > hi:
            continue
        counts[min(bisect_right(edges, v) - 1, bins - 1)] += 1
    return counts, edges
