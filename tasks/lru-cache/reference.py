from collections.abc import Callable, Hashable
from typing import Any


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key: Hashable = None, value: Any = None) -> None:
        self.key = key
        self.value = value
        self.prev: _Node = self
        self.next: _Node = self


class LRUCache:
    def __init__(self, capacity: int, on_evict: Callable[[Hashable, Any], None] | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._on_evict = on_evict
        self._map: dict[Hashable, _Node] = {}
        self._head = _Node()  # sentinel: head.next is the least recently used entry

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._map

    def _unlink(self, node: _Node) -> None:
        node.prev.next = node.next
        node.next.prev = node.prev

    def _append(self, node: _Node) -> None:
        last = self._head.prev
        last.next = node
        node.prev = last
        node.next = self._head
        self._head.prev = node

    def get(self, key: Hashable, default: Any = None) -> Any:
        node = self._map.get(key)
        if node is None:
            return default
        self._unlink(node)
        self._append(node)
        return node.value

    def peek(self, key: Hashable, default: Any = None) -> Any:
        node = self._map.get(key)
        return default if node is None else node.value

    def put(self, key: Hashable, value: Any) -> None:
        node = self._map.get(key)
        if node is not None:
            node.value = value
            self._unlink(node)
            self._append(node)
            return
        if len(self._map) >= self._capacity:
            self._evict_oldest()
        node = _Node(key, value)
        self._map[key] = node
        self._append(node)

    def _evict_oldest(self) -> None:
        oldest = self._head.next
        self._unlink(oldest)
        del self._map[oldest.key]
        if self._on_evict is not None:
            self._on_evict(oldest.key, oldest.value)

    def delete(self, key: Hashable) -> bool:
        node = self._map.pop(key, None)
        if node is None:
            return False
        self._unlink(node)
        return True

    def resize(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        while len(self._map) > capacity:
            self._evict_oldest()

    def items(self) -> list[tuple]:
        out = []
        node = self._head.next
        while node is not self._head:
            out.append((node.key, node.value))
            node = node.next
        return out

    def keys(self) -> list:
        return [key for key, _ in self.items()]
