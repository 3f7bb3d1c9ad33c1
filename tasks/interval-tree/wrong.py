import random
from collections.abc import Iterator
from typing import Any, NamedTuple


class Interval(NamedTuple):
    start: float
    end: float
    data: Any


class _Node:
    __slots__ = ("key", "data", "priority", "max_end", "left", "right")

    def __init__(self, key: tuple, data: Any, priority: float) -> None:
        self.key = key  # (start, end, insertion sequence number)
        self.data = data
        self.priority = priority
        self.max_end = key[1]
        self.left: _Node | None = None
        self.right: _Node | None = None

    def update(self) -> None:
        best = self.key[1]
        if self.left is not None and self.left.max_end > best:
            best = self.left.max_end
        if self.right is not None and self.right.max_end > best:
            best = self.right.max_end
        self.max_end = best


def _rotate_right(node: _Node) -> _Node:
    top = node.left
    node.left = top.right
    top.right = node
    node.update()
    top.update()
    return top


def _rotate_left(node: _Node) -> _Node:
    top = node.right
    node.right = top.left
    top.left = node
    node.update()
    top.update()
    return top


class IntervalTree:
    """A treap ordered by (start, end, insertion order), each node knowing the largest end below it."""

    def __init__(self) -> None:
        self._root: _Node | None = None
        self._size = 0
        self._seq = 0
        self._rng = random.Random(0x1D7)

    def __len__(self) -> int:
        return self._size

    def insert(self, start, end, data: Any = None) -> None:
        if not start < end:
            raise ValueError(f"empty interval [{start}, {end})")
        self._seq += 1
        node = _Node((start, end, self._seq), data, self._rng.random())
        self._root = self._insert(self._root, node)
        self._size += 1

    def _insert(self, root: _Node | None, node: _Node) -> _Node:
        if root is None:
            return node
        if node.key < root.key:
            root.left = self._insert(root.left, node)
            if root.left.priority > root.priority:
                root = _rotate_right(root)
        else:
            root.right = self._insert(root.right, node)
            if root.right.priority > root.priority:
                root = _rotate_left(root)
        root.update()
        return root

    def delete(self, start, end, data: Any = None) -> bool:
        for node in self._nodes_in_range((start, end, 0), (start, end, self._seq + 1)):
            if node.data == data:
                self._root = self._delete(self._root, node.key)
                self._size -= 1
                return True
        return False

    def _delete(self, root: _Node | None, key: tuple) -> _Node | None:
        if root is None:
            return None
        if key < root.key:
            root.left = self._delete(root.left, key)
        elif key > root.key:
            root.right = self._delete(root.right, key)
        elif root.left is None:
            return root.right
        elif root.right is None:
            return root.left
        elif root.left.priority > root.right.priority:
            root = _rotate_right(root)
            root.right = self._delete(root.right, key)
        else:
            root = _rotate_left(root)
            root.left = self._delete(root.left, key)
        root.update()
        return root

    def _nodes_in_range(self, low: tuple, high: tuple) -> Iterator[_Node]:
        """Nodes with low <= key < high, in key order."""
        stack: list[_Node] = []
        node = self._root
        while stack or node is not None:
            if node is not None:
                if node.key < low:
                    node = node.right
                    continue
                stack.append(node)
                node = node.left
                continue
            node = stack.pop()
            if node.key >= high:
                return
            yield node
            node = node.right

    def overlap(self, start, end) -> list[Interval]:
        if not start < end:
            raise ValueError(f"empty query [{start}, {end})")
        out: list[Interval] = []
        self._collect(self._root, start, end, out)
        return out

    def at(self, point) -> list[Interval]:
        out: list[Interval] = []
        self._collect(self._root, point, None, out)
        return out

    def _collect(self, node: _Node | None, start, end, out: list[Interval]) -> None:
        """In-order walk that prunes subtrees ending at or before `start` or starting at or after `end`."""
        if node is None or node.max_end < start:
            return
        self._collect(node.left, start, end, out)
        node_start, node_end, _ = node.key
        if end is None:
            if node_start > start:
                return
        elif node_start > end:
            return
        if node_end >= start:
            out.append(Interval(node_start, node_end, node.data))
        self._collect(node.right, start, end, out)

    def __iter__(self) -> Iterator[Interval]:
        for node in self._nodes_in_range((float("-inf"),), (float("inf"),)):
            yield Interval(node.key[0], node.key[1], node.data)
