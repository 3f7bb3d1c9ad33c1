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
    raise CycleError(_find_cycle(successors))


def _find_cycle(successors: dict[str, set[str]]) -> list[str]:
    """Iterative depth-first search; a back edge closes a cycle."""
    state: dict[str, int] = {}
    for start in sorted(successors):
        if start in state:
            continue
        path = [start]
        state[start] = 1
        stack = [iter(sorted(successors[start]))]
        while stack:
            advanced = False
            for v in stack[-1]:
                if state.get(v) == 1:
                    cycle = list(path)
                    smallest = cycle.index(min(cycle))
                    return cycle[smallest:] + cycle[:smallest]
                if v not in state:
                    state[v] = 1
                    path.append(v)
                    stack.append(iter(sorted(successors[v])))
                    advanced = True
                    break
            if not advanced:
                state[path.pop()] = 2
                stack.pop()
    raise AssertionError("no cycle found")
