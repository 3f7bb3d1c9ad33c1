import random
from collections.abc import Callable, Iterator
from typing import Any


class _Node:
    __slots__ = ("key", "value", "next", "width")

    def __init__(self, key: Any, value: Any, height: int, nil: "_Node | None" = None) -> None:
        self.key = key
        self.value = value
        self.next: list[_Node] = [nil] * height  # type: ignore[list-item]
        self.width = [1] * height  # bottom-level steps spanned by each link


class SkipList:
    def __init__(self, *, random_level: Callable[[], int] | None = None, max_level: int = 32) -> None:
        if max_level < 1:
            raise ValueError("max_level must be at least 1")
        self._max = max_level
        if random_level is None:
            rng = random.Random(0x5C1B)

            def random_level() -> int:
                level = 1
                while level < max_level and rng.random() < 0.5:
                    level += 1
                return level

        self._random_level = random_level
        self._nil = _Node(None, None, 0)
        self._head = _Node(None, None, max_level, self._nil)
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _descend(self, key: Any) -> tuple[list[_Node], list[int]]:
        """Per level, the last node with a key < key, and its position (head is 0, first key is 1)."""
        chain: list[_Node] = [self._head] * self._max
        positions = [0] * self._max
        node, pos = self._head, 0
        for level in range(self._max - 1, -1, -1):
            nxt = node.next[level]
            while nxt is not self._nil and nxt.key < key:
                pos += node.width[level]
                node = nxt
                nxt = node.next[level]
            chain[level] = node
            positions[level] = pos
        return chain, positions

    def _find(self, key: Any) -> _Node | None:
        node = self._descend(key)[0][0].next[0]
        return node if node is not self._nil and node.key == key else None

    def __setitem__(self, key: Any, value: Any) -> None:
        chain, positions = self._descend(key)
        candidate = chain[0].next[0]
        if candidate is not self._nil and candidate.key == key:
            candidate.value = value
            return
        height = min(max(1, self._random_level()), self._max)
        node = _Node(key, value, height, self._nil)
        new_pos = positions[0] + 1
        for level in range(height):
            prev = chain[level]
            distance = new_pos - positions[level]
            node.next[level] = prev.next[level]
            node.width[level] = prev.width[level] - distance + 1
            prev.next[level] = node
            prev.width[level] = distance
        for level in range(height, self._max):
            chain[level].width[level] += 1
        self._size += 1

    def __delitem__(self, key: Any) -> None:
        chain, _ = self._descend(key)
        target = chain[0].next[0]
        if target is self._nil or target.key != key:
            raise KeyError(key)
        for level in range(len(target.next)):
            prev = chain[level]
            prev.width[level] += target.width[level] - 1
            prev.next[level] = target.next[level]
        self._size -= 1

    def __getitem__(self, key: Any) -> Any:
        node = self._find(key)
        if node is None:
            raise KeyError(key)
        return node.value

    def get(self, key: Any, default: Any = None) -> Any:
        node = self._find(key)
        return default if node is None else node.value

    def __contains__(self, key: Any) -> bool:
        return self._find(key) is not None

    def _nodes_from(self, node: _Node) -> Iterator[_Node]:
        while node is not self._nil:
            yield node
            node = node.next[0]

    def __iter__(self) -> Iterator:
        for node in self._nodes_from(self._head.next[0]):
            yield node.key

    def items(self) -> list[tuple]:
        return [(node.key, node.value) for node in self._nodes_from(self._head.next[0])]

    def range(self, lo: Any = None, hi: Any = None) -> list[tuple]:
        start = self._head.next[0] if lo is None else self._descend(lo)[0][0].next[0]
        out = []
        for node in self._nodes_from(start):
            if hi is not None and not node.key < hi:
                break
            out.append((node.key, node.value))
        return out

    def floor(self, key: Any) -> Any:
        node = self._find(key)
        if node is not None:
            return node.key
        before = self._descend(key)[0][0]
        if before is self._head:
            raise KeyError(f"no key <= {key!r}")
        return before.key

    def ceiling(self, key: Any) -> Any:
        after = self._descend(key)[0][0].next[0]
        if after is self._nil:
            raise KeyError(f"no key >= {key!r}")
        return after.key

    def rank(self, key: Any) -> int:
        return self._descend(key)[1][0]

    def key_at(self, index: int) -> Any:
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("skip list index out of range")
        target = index + 1
        node, pos = self._head, 0
        for level in range(self._max - 1, -1, -1):
            while node.next[level] is not self._nil and pos + node.width[level] <= target:
                pos += node.width[level]
                node = node.next[level]
        return node.key
