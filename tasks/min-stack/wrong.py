class MinStack:
    def __init__(self) -> None:
        self._values: list = []
        self._mins: list = []

    def push(self, value) -> None:
        self._values.append(value)
        if not self._mins or value < self._mins[-1]:
            self._mins.append(value)

    def pop(self):
        if not self._values:
            raise IndexError("pop from empty MinStack")
        value = self._values.pop()
        if value == self._mins[-1]:
            self._mins.pop()
        return value

    def peek(self):
        if not self._values:
            raise IndexError("peek at empty MinStack")
        return self._values[-1]

    def min(self):
        if not self._mins:
            raise IndexError("min of empty MinStack")
        return self._mins[-1]

    def __len__(self) -> int:
        return len(self._values)
