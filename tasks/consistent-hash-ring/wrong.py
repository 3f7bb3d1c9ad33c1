import bisect
import hashlib
from collections.abc import Iterable


def ring_hash(text: str) -> int:
    """First 8 bytes of the MD5 digest of the UTF-8 text, as a big-endian unsigned integer."""
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big")


class HashRing:
    def __init__(self, nodes: Iterable[str] = (), *, vnodes: int = 100) -> None:
        if vnodes < 1:
            raise ValueError("vnodes must be at least 1")
        self._vnodes = vnodes
        self._weights: dict[str, int] = {}
        self._points: list[tuple[int, str]] = []  # (position, node), sorted
        self._positions: list[int] = []
        for node in nodes:
            self.add_node(node)

    @property
    def nodes(self) -> list[str]:
        return sorted(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def __contains__(self, node: str) -> bool:
        return node in self._weights

    def _rebuild(self) -> None:
        self._points.sort()
        self._positions = [position for position, _ in self._points]

    def add_node(self, node: str, weight: int = 1) -> None:
        if weight < 1:
            raise ValueError("weight must be at least 1")
        if node in self._weights:
            raise ValueError(f"node {node!r} is already on the ring")
        self._weights[node] = weight
        self._points.extend((ring_hash(f"{node}#{i}"), node) for i in range(self._vnodes * weight))
        self._rebuild()

    def remove_node(self, node: str) -> None:
        if node not in self._weights:
            raise KeyError(node)
        del self._weights[node]
        self._points = [point for point in self._points if point[1] != node]
        self._rebuild()

    def _start(self, key: str) -> int:
        if not self._points:
            raise LookupError("the ring has no nodes")
        index = bisect.bisect_right(self._positions, ring_hash(key))
        return 0 if index == len(self._positions) else index

    def node_for(self, key: str) -> str:
        return self._points[self._start(key)][1]

    def nodes_for(self, key: str, count: int) -> list[str]:
        if count < 0:
            raise ValueError("count must be >= 0")
        if count == 0:
            return []
        start = self._start(key)
        wanted = min(count, len(self._weights))
        found: list[str] = []
        for offset in range(len(self._points)):
            node = self._points[(start + offset) % len(self._points)][1]
            if node not in found:
                found.append(node)
                if len(found) == wanted:
                    break
        return found
