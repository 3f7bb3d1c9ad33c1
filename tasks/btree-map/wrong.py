import bisect
from collections.abc import Iterator
from typing import Any


class Node:
    __slots__ = ("keys", "values", "children")

    def __init__(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.children: list[Node] = []

    @property
    def leaf(self) -> bool:
        return not self.children


class BTree:
    def __init__(self, min_degree: int = 2) -> None:
        if min_degree < 2:
            raise ValueError("min_degree must be at least 2")
        self._t = min_degree
        self._root = Node()
        self._size = 0

    @property
    def root(self) -> Node:
        return self._root

    @property
    def height(self) -> int:
        node, height = self._root, 0
        while node.children:
            node = node.children[0]
            height += 1
        return height

    def __len__(self) -> int:
        return self._size

    def _locate(self, key: Any) -> tuple[Node, int] | None:
        node = self._root
        while True:
            i = bisect.bisect_left(node.keys, key)
            if i < len(node.keys) and node.keys[i] == key:
                return node, i
            if node.leaf:
                return None
            node = node.children[i]

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._locate(key)
        return default if found is None else found[0].values[found[1]]

    def __contains__(self, key: Any) -> bool:
        return self._locate(key) is not None

    def __iter__(self) -> Iterator:
        for key, _ in self._walk(self._root):
            yield key

    def _walk(self, node: Node) -> Iterator[tuple]:
        # Iterative in-order walk: (node, next index) frames.
        stack = [(node, 0)]
        while stack:
            current, i = stack.pop()
            if current.leaf:
                yield from zip(current.keys, current.values)
                continue
            if i < len(current.keys) + 1:
                if i > 0:
                    yield current.keys[i - 1], current.values[i - 1]
                stack.append((current, i + 1))
                stack.append((current.children[i], 0))

    def items(self) -> list[tuple]:
        return list(self._walk(self._root))

    def range(self, lo: Any, hi: Any) -> list[tuple]:
        if not lo < hi:
            return []
        out: list[tuple] = []
        self._range(self._root, lo, hi, out)
        return out

    def _range(self, node: Node, lo: Any, hi: Any, out: list[tuple]) -> None:
        start = bisect.bisect_left(node.keys, lo)
        for i in range(start, len(node.keys) + 1):
            if not node.leaf:
                self._range(node.children[i], lo, hi, out)
            if i == len(node.keys) or not node.keys[i] < hi:
                return
            out.append((node.keys[i], node.values[i]))

    # --- insertion (CLRS: split full nodes on the way down) ---

    def insert(self, key: Any, value: Any) -> None:
        found = self._locate(key)
        if found is not None:
            node, i = found
            node.values[i] = value
            return
        root = self._root
        if len(root.keys) == 2 * self._t - 1:
            new_root = Node()
            new_root.children.append(root)
            self._split_child(new_root, 0)
            self._root = new_root
        self._insert_nonfull(self._root, key, value)
        self._size += 1

    def _split_child(self, parent: Node, i: int) -> None:
        t = self._t
        full = parent.children[i]
        right = Node()
        right.keys, full.keys, middle_key = full.keys[t:], full.keys[: t - 1], full.keys[t - 1]
        right.values, full.values, middle_value = full.values[t:], full.values[: t - 1], full.values[t - 1]
        if full.children:
            right.children, full.children = full.children[t:], full.children[:t]
        parent.keys.insert(i, middle_key)
        parent.values.insert(i, middle_value)
        parent.children.insert(i + 1, right)

    def _insert_nonfull(self, node: Node, key: Any, value: Any) -> None:
        while True:
            i = bisect.bisect_left(node.keys, key)
            if node.leaf:
                node.keys.insert(i, key)
                node.values.insert(i, value)
                return
            if len(node.children[i].keys) == 2 * self._t - 1:
                self._split_child(node, i)
                if node.keys[i] < key:
                    i += 1
            node = node.children[i]

    # --- deletion (CLRS: make sure a child has >= t keys before descending into it) ---

    def delete(self, key: Any) -> None:
        if self._locate(key) is None:
            raise KeyError(key)
        self._delete(self._root, key)
        self._size -= 1

    def _delete(self, node: Node, key: Any) -> None:
        t = self._t
        while True:
            i = bisect.bisect_left(node.keys, key)
            here = i < len(node.keys) and node.keys[i] == key
            if node.leaf:
                del node.keys[i]
                del node.values[i]
                return
            if here:
                left, right = node.children[i], node.children[i + 1]
                if len(left.keys) >= t:
                    pred = left
                    while pred.children:
                        pred = pred.children[-1]
                    node.keys[i], node.values[i] = pred.keys[-1], pred.values[-1]
                    node, key = left, pred.keys[-1]
                elif len(right.keys) >= t:
                    succ = right
                    while succ.children:
                        succ = succ.children[0]
                    node.keys[i], node.values[i] = succ.keys[0], succ.values[0]
                    node, key = right, succ.keys[0]
                else:
                    self._merge(node, i)
                    node = left
                continue
            child = node.children[i]
            if len(child.keys) == t - 1:
                if i > 0 and len(node.children[i - 1].keys) >= t:
                    self._borrow_from_left(node, i)
                elif i < len(node.keys) and len(node.children[i + 1].keys) >= t:
                    self._borrow_from_right(node, i)
                elif i < len(node.keys):
                    self._merge(node, i)
                else:
                    self._merge(node, i - 1)
                    child = node.children[i - 1]
            node = child

    def _merge(self, parent: Node, i: int) -> None:
        """Fold parent.keys[i] and children[i + 1] into children[i]."""
        left, right = parent.children[i], parent.children[i + 1]
        left.keys.append(parent.keys.pop(i))
        left.values.append(parent.values.pop(i))
        left.keys.extend(right.keys)
        left.values.extend(right.values)
        left.children.extend(right.children)
        del parent.children[i + 1]

    def _borrow_from_left(self, parent: Node, i: int) -> None:
        child, sibling = parent.children[i], parent.children[i - 1]
        child.keys.insert(0, parent.keys[i - 1])
        child.values.insert(0, parent.values[i - 1])
        parent.keys[i - 1] = sibling.keys.pop()
        parent.values[i - 1] = sibling.values.pop()
        if sibling.children:
            child.children.insert(0, sibling.children.pop())

    def _borrow_from_right(self, parent: Node, i: int) -> None:
        child, sibling = parent.children[i], parent.children[i + 1]
        child.keys.append(parent.keys[i])
        child.values.append(parent.values[i])
        parent.keys[i] = sibling.keys.pop(0)
        parent.values[i] = sibling.values.pop(0)
        if sibling.children:
            child.children.append(sibling.children.pop(0))
