import heapq


class _Node:
    __slots__ = ("children", "weight", "count")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.weight: float | None = None  # None: no word ends here
        self.count = 0  # words in this subtree


class Autocomplete:
    def __init__(self) -> None:
        self._root = _Node()

    def __len__(self) -> int:
        return sum(1 for _ in self._words(self._root, ""))

    def _words(self, node, text):
        if node.weight is not None:
            yield text
        for ch, child in node.children.items():
            yield from self._words(child, text + ch)

    def __contains__(self, word: str) -> bool:
        node = self._find(word)
        return node is not None and node.weight is not None

    @staticmethod
    def _check(word: str) -> None:
        if not word:
            raise ValueError("words must be non-empty")

    def _find(self, prefix: str) -> _Node | None:
        node = self._root
        for ch in prefix:
            node = node.children.get(ch)
            if node is None:
                return None
        return node

    def _set(self, word: str, weight: float) -> None:
        node = self._root
        node.count += 1
        for ch in word:
            node = node.children.setdefault(ch, _Node())
            node.count += 1
        node.weight = weight

    def add(self, word: str, weight: float) -> None:
        self._check(word)
        self._set(word, weight)

    def increment(self, word: str, delta: float = 1.0) -> float:
        self._check(word)
        node = self._find(word)
        current = node.weight if node is not None and node.weight is not None else 0
        self._set(word, current + delta)
        return current + delta

    def weight(self, word: str) -> float:
        self._check(word)
        node = self._find(word)
        if node is None or node.weight is None:
            raise KeyError(word)
        return node.weight

    def remove(self, word: str) -> bool:
        self._check(word)
        if word not in self:
            return False
        path = [self._root]
        for ch in word:
            path.append(path[-1].children[ch])
        path[-1].weight = None
        for node in path:
            node.count -= 1
        # Prune the branch that no longer leads to any word.
        for depth in range(len(word), 0, -1):
            if path[depth].count == 0:
                del path[depth - 1].children[word[depth - 1]]
                break
        return True

    def suggest(self, prefix: str, limit: int = 10) -> list[str]:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        start = self._find(prefix)
        if start is None or limit == 0:
            return []
        found = []
        stack = [(start, prefix)]
        while stack:
            node, text = stack.pop()
            if node.weight is not None:
                found.append((-node.weight, text))
            for ch, child in node.children.items():
                stack.append((child, text + ch))
        return [word for _, word in heapq.nsmallest(limit, found)]

    def prefix_count(self, prefix: str) -> int:
        node = self._find(prefix)
        return 0 if node is None else node.count
