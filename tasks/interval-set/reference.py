from bisect import bisect_left, bisect_right


class IntervalSet:
    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    @staticmethod
    def _check(start: int, end: int) -> None:
        if start > end:
            raise ValueError(f"start {start} > end {end}")

    def add(self, start: int, end: int) -> None:
        self._check(start, end)
        if start == end:
            return
        # Intervals whose end >= start and whose start <= end touch or overlap the new one.
        lo = bisect_left(self._ends, start)
        hi = bisect_right(self._starts, end)
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]

    def remove(self, start: int, end: int) -> None:
        self._check(start, end)
        if start == end:
            return
        lo = bisect_right(self._ends, start)
        hi = bisect_left(self._starts, end)
        if lo >= hi:
            return
        new_starts, new_ends = [], []
        if self._starts[lo] < start:
            new_starts.append(self._starts[lo])
            new_ends.append(start)
        if self._ends[hi - 1] > end:
            new_starts.append(end)
            new_ends.append(self._ends[hi - 1])
        self._starts[lo:hi] = new_starts
        self._ends[lo:hi] = new_ends

    def contains(self, point: int) -> bool:
        i = bisect_right(self._starts, point) - 1
        return i >= 0 and point < self._ends[i]

    def overlaps(self, start: int, end: int) -> bool:
        self._check(start, end)
        if start == end:
            return False
        i = bisect_right(self._ends, start)
        return i < len(self._starts) and self._starts[i] < end

    def intervals(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._ends))

    def total_length(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends))

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        self._check(start, end)
        result = []
        cursor = start
        i = bisect_right(self._ends, start)
        while cursor < end and i < len(self._starts):
            s, e = self._starts[i], self._ends[i]
            if s >= end:
                break
            if s > cursor:
                result.append((cursor, s))
            cursor = max(cursor, e)
            i += 1
        if cursor < end:
            result.append((cursor, end))
        return result
