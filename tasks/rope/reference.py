from collections.abc import Iterator

LEAF_MAX = 64


class _Leaf:
    __slots__ = ("text", "length")
    height = 0

    def __init__(self, text: str) -> None:
        self.text = text
        self.length = len(text)


class _Node:
    __slots__ = ("left", "right", "length", "height")

    def __init__(self, left: "_Tree", right: "_Tree") -> None:
        self.left = left
        self.right = right
        self.length = left.length + right.length
        self.height = max(left.height, right.height) + 1


_Tree = _Leaf | _Node


def _balance(left: _Tree, right: _Tree) -> _Tree:
    """A node over two trees whose heights differ by at most 2, rotated back to AVL shape."""
    if left.height > right.height + 1:
        if left.left.height >= left.right.height:
            return _Node(left.left, _Node(left.right, right))
        inner = left.right
        return _Node(_Node(left.left, inner.left), _Node(inner.right, right))
    if right.height > left.height + 1:
        if right.right.height >= right.left.height:
            return _Node(_Node(left, right.left), right.right)
        inner = right.left
        return _Node(_Node(left, inner.left), _Node(inner.right, right.right))
    return _Node(left, right)


def _join(a: _Tree | None, b: _Tree | None) -> _Tree | None:
    if a is None or a.length == 0:
        return b
    if b is None or b.length == 0:
        return a
    if isinstance(a, _Leaf) and isinstance(b, _Leaf) and a.length + b.length <= LEAF_MAX:
        return _Leaf(a.text + b.text)
    if a.height > b.height + 1:
        return _balance(a.left, _join(a.right, b))
    if b.height > a.height + 1:
        return _balance(_join(a, b.left), b.right)
    return _Node(a, b)


def _split(tree: _Tree | None, i: int) -> tuple[_Tree | None, _Tree | None]:
    if tree is None:
        return None, None
    if isinstance(tree, _Leaf):
        left = _Leaf(tree.text[:i]) if i > 0 else None
        right = _Leaf(tree.text[i:]) if i < tree.length else None
        return left, right
    if i <= tree.left.length:
        a, b = _split(tree.left, i)
        return a, _join(b, tree.right)
    a, b = _split(tree.right, i - tree.left.length)
    return _join(tree.left, a), b


def _build(chunks: list[str], lo: int, hi: int) -> _Tree:
    if hi - lo == 1:
        return _Leaf(chunks[lo])
    mid = (lo + hi) // 2
    return _Node(_build(chunks, lo, mid), _build(chunks, mid, hi))


class Rope:
    __slots__ = ("_tree",)

    def __init__(self, text: str = "") -> None:
        if isinstance(text, Rope):
            self._tree = text._tree
            return
        if not isinstance(text, str):
            raise TypeError("Rope() takes a str")
        chunks = [text[i : i + LEAF_MAX] for i in range(0, len(text), LEAF_MAX)]
        self._tree = _build(chunks, 0, len(chunks)) if chunks else None

    @classmethod
    def _wrap(cls, tree: _Tree | None) -> "Rope":
        rope = cls.__new__(cls)
        rope._tree = tree
        return rope

    @staticmethod
    def _coerce(other: "Rope | str") -> _Tree | None:
        if isinstance(other, Rope):
            return other._tree
        if isinstance(other, str):
            return Rope(other)._tree
        raise TypeError(f"expected str or Rope, got {type(other).__name__}")

    def __len__(self) -> int:
        return 0 if self._tree is None else self._tree.length

    @property
    def depth(self) -> int:
        return 0 if self._tree is None else self._tree.height

    def _leaves(self) -> Iterator[str]:
        stack = [self._tree] if self._tree is not None else []
        while stack:
            node = stack.pop()
            if isinstance(node, _Leaf):
                yield node.text
            else:
                stack.append(node.right)
                stack.append(node.left)

    def __str__(self) -> str:
        return "".join(self._leaves())

    def __repr__(self) -> str:
        return f"Rope({str(self)!r})"

    def __iter__(self) -> Iterator[str]:
        for text in self._leaves():
            yield from text

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rope | str):
            return len(self) == len(other) and str(self) == str(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, index: int | slice) -> "str | Rope":
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise ValueError("ropes only support contiguous slices")
            start, stop, _ = index.indices(len(self))
            if stop <= start:
                return Rope()
            return self.delete(stop, len(self)).delete(0, start)
        if not isinstance(index, int):
            raise TypeError("rope indices must be integers or slices")
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("rope index out of range")
        node = self._tree
        while isinstance(node, _Node):
            if index < node.left.length:
                node = node.left
            else:
                index -= node.left.length
                node = node.right
        return node.text[index]

    def __add__(self, other: "Rope | str") -> "Rope":
        return Rope._wrap(_join(self._tree, self._coerce(other)))

    def __radd__(self, other: str) -> "Rope":
        return Rope._wrap(_join(self._coerce(other), self._tree))

    def _check_position(self, index: int) -> None:
        if not isinstance(index, int) or not 0 <= index <= len(self):
            raise IndexError(f"position {index} out of range 0..{len(self)}")

    def split(self, index: int) -> tuple["Rope", "Rope"]:
        self._check_position(index)
        left, right = _split(self._tree, index)
        return Rope._wrap(left), Rope._wrap(right)

    def insert(self, index: int, text: "Rope | str") -> "Rope":
        self._check_position(index)
        left, right = _split(self._tree, index)
        return Rope._wrap(_join(_join(left, self._coerce(text)), right))

    def delete(self, start: int, end: int) -> "Rope":
        self._check_position(start)
        self._check_position(end)
        if start > end:
            raise IndexError(f"start {start} is after end {end}")
        left, rest = _split(self._tree, start)
        _, right = _split(rest, end - start)
        return Rope._wrap(_join(left, right))

    def find(self, sub: str, start: int = 0) -> int:
        return str(self).find(sub, start)

