from collections.abc import Iterable


def _on_min_level(i: int) -> bool:
    return (i + 1).bit_length() % 2 == 1


class MinMaxHeap:
    def __init__(self, items: Iterable = ()) -> None:
        self._a = list(items)
        for i in range(len(self._a) // 2 - 1, -1, -1):
            self._trickle_down(i)

    def __len__(self) -> int:
        return len(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def push(self, item) -> None:
        self._a.append(item)
        self._bubble_up(len(self._a) - 1)

    def peek_min(self):
        if not self._a:
            raise IndexError("peek from an empty heap")
        return self._a[0]

    def peek_max(self):
        if not self._a:
            raise IndexError("peek from an empty heap")
        return self._a[self._max_index()]

    def pop_min(self):
        if not self._a:
            raise IndexError("pop from an empty heap")
        return self._remove(0)

    def pop_max(self):
        if not self._a:
            raise IndexError("pop from an empty heap")
        return self._remove(self._max_index())

    def pushpop_min(self, item):
        a = self._a
        if not a or not a[0] < item:
            return item
        smallest, a[0] = a[0], item
        self._trickle_down(0)
        return smallest

    def to_sorted_list(self) -> list:
        return sorted(self._a)

    def _max_index(self) -> int:
        a = self._a
        if len(a) == 1:
            return 0
        if len(a) == 2 or not a[1] < a[2]:
            return 1
        return 2

    def _remove(self, i: int):
        a = self._a
        item = a[i]
        last = a.pop()
        if i < len(a):
            a[i] = last
            self._trickle_down(i)
        return item

    def _bubble_up(self, i: int) -> None:
        a = self._a
        if i == 0:
            return
        parent = (i - 1) // 2
        if _on_min_level(i):
            if a[parent] < a[i]:
                a[i], a[parent] = a[parent], a[i]
                self._bubble_up_grand(parent, larger=True)
            else:
                self._bubble_up_grand(i, larger=False)
        elif a[i] < a[parent]:
            a[i], a[parent] = a[parent], a[i]
            self._bubble_up_grand(parent, larger=False)
        else:
            self._bubble_up_grand(i, larger=True)

    def _bubble_up_grand(self, i: int, larger: bool) -> None:
        a = self._a
        while i >= 3:
            grand = ((i - 1) // 2 - 1) // 2
            if (a[grand] < a[i]) if larger else (a[i] < a[grand]):
                a[i], a[grand] = a[grand], a[i]
                i = grand
            else:
                break

    def _trickle_down(self, i: int) -> None:
        a = self._a
        n = len(a)
        is_min = _on_min_level(i)

        def better(x: int, y: int) -> bool:
            return a[x] < a[y] if is_min else a[y] < a[x]

        while True:
            first_child = 2 * i + 1
            if first_child >= n:
                return
            candidates = [c for c in (first_child, first_child + 1) if c < n]
            candidates += [g for c in (first_child, first_child + 1) for g in (2 * c + 1, 2 * c + 2) if g < n]
            m = candidates[0]
            for c in candidates[1:]:
                if better(c, m):
                    m = c
            if not better(m, i):
                return
            a[i], a[m] = a[m], a[i]
            if m <= first_child + 1:
                return
            parent = (m - 1) // 2
            if better(parent, m):
                a[m], a[parent] = a[parent], a[m]
            i = m
