class MinStack:
    def __init__(self) -> None:
        # Each entry carries the minimum of everything at or below it.
        self._entries: list[tuple[object, object]] = []

    def push(self, value) -> None:
        if self._entries and not value < self._entries[-1][1]:
            self._entries.append((value, self._entries[-1][1]))
        else:
            self._entries.append((value, value))

    def pop(self):
        if not self._entries:
            raise IndexError("pop from empty MinStack")
        return self._entries.pop()[0]

    def peek(self):
        if not self._entries:
            raise IndexError("peek at empty MinStack")
        return self._entries[-1][0]

    def min(self):
        if not self._entries:
            raise IndexError("min of empty MinStack")
        return self._entries[-1][1]

    def __len__(self) -> int:
        return len(self._entries)
