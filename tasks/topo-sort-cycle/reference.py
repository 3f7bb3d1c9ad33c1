import heapq
from collections.abc import Iterable


class CycleError(ValueError):
    def __init__(self, cycle: list[str]) -> None:
        super().__init__("cycle: " + " -> ".join(cycle + cycle[:1]))
        self.cycle = cycle


def topo_sort(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    successors: dict[str, set[str]] = {}
    for node in nodes:
        successors.setdefault(node, set())
    for u, v in edges:
        successors.setdefault(u, set()).add(v)
        successors.setdefault(v, set())
    indegree = dict.fromkeys(successors, 0)
    for targets in successors.values():
        for v in targets:
            indegree[v] += 1

    ready = [node for node, degree in indegree.items() if degree == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for v in successors[node]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, v)
    if len(order) == len(successors):
        return order
    raise CycleError(_find_cycle(successors, indegree))


def _find_cycle(successors: dict[str, set[str]], indegree: dict[str, int]) -> list[str]:
    """Every unplaced node has an unplaced predecessor, so walking predecessors must loop."""
    remaining = {node for node, degree in indegree.items() if degree > 0}
    predecessor: dict[str, str] = {}
    for u in remaining:
        for v in successors[u]:
            if v in remaining:
                predecessor.setdefault(v, u)
    position: dict[str, int] = {}
    walk: list[str] = []
    node = min(remaining)
    while node not in position:
        position[node] = len(walk)
        walk.append(node)
        node = predecessor[node]
    cycle = walk[position[node] :]
    cycle.reverse()
    smallest = cycle.index(min(cycle))
    return cycle[smallest:] + cycle[:smallest]
