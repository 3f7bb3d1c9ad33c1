class RollbackUnionFind:
    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError("n must be >= 0")
        self._parent = list(range(n))
        self._size = [1] * n
        self._components = n
        self._history: list[tuple[int, int]] = []  # (absorbed root, surviving root) per successful union
        self._tokens: list[tuple[int, int]] = []  # (token, history length), tokens increasing
        self._next_token = 0

    def __len__(self) -> int:
        return len(self._parent)

    @property
    def components(self) -> int:
        return self._components

    def _check(self, x: int) -> None:
        if not 0 <= x < len(self._parent):
            raise IndexError(f"element {x} out of range 0..{len(self._parent) - 1}")

    def find(self, x: int) -> int:
        self._check(x)
        parent = self._parent
        while parent[x] != x:
            x = parent[x]
        return x

    def connected(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    def size(self, x: int) -> int:
        return self._size[self.find(x)]

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self._size[ra] < self._size[rb]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]
        self._components -= 1
        self._history.append((rb, ra))
        return True

    def snapshot(self) -> int:
        token = self._next_token
        self._next_token += 1
        self._tokens.append((token, len(self._history)))
        return token

    def rollback(self, token: int) -> None:
        for known, length in reversed(self._tokens):
            if known == token:
                break
            if known < token:
                raise ValueError(f"unknown or invalidated snapshot token {token!r}")
        else:
            raise ValueError(f"unknown or invalidated snapshot token {token!r}")
        while self._tokens[-1][0] != token:
            self._tokens.pop()
        while len(self._history) > length:
            child, root = self._history.pop()
            self._parent[child] = child
            self._size[root] -= self._size[child]
            self._components += 1
