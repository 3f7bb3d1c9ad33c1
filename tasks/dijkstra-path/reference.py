import heapq
import math
from collections.abc import Iterable


def shortest_path(edges: Iterable[tuple[str, str, float]], source: str, target: str) -> tuple[float, list[str]]:
    graph: dict[str, dict[str, float]] = {}
    for u, v, w in edges:
        if w < 0:
            raise ValueError(f"negative weight {w} on {u} -> {v}")
        out = graph.setdefault(u, {})
        if v not in out or w < out[v]:
            out[v] = w
        graph.setdefault(v, {})
    if source == target:
        return 0, [source]
    if source not in graph or target not in graph:
        return math.inf, []

    # Dijkstra on (distance, hops): zero-weight edges still add a hop, so labels strictly grow.
    best: dict[str, tuple[float, int]] = {source: (0, 0)}
    heap = [(0, 0, source)]
    settled: set[str] = set()
    while heap:
        dist, hops, u = heapq.heappop(heap)
        if u in settled:
            continue
        settled.add(u)
        for v, w in graph[u].items():
            label = (dist + w, hops + 1)
            if v not in best or label < best[v]:
                best[v] = label
                heapq.heappush(heap, (label[0], label[1], v))
    if target not in best:
        return math.inf, []

    # Edges that lie on some optimal (distance, hops) route form a DAG; keep the part reaching target.
    def tight(u: str, v: str) -> bool:
        return v in best and best[v] == (best[u][0] + graph[u][v], best[u][1] + 1)

    predecessors: dict[str, list[str]] = {}
    for u in best:
        for v in graph[u]:
            if tight(u, v):
                predecessors.setdefault(v, []).append(u)
    useful = {target}
    stack = [target]
    while stack:
        for u in predecessors.get(stack.pop(), []):
            if u not in useful:
                useful.add(u)
                stack.append(u)

    # All such routes have the same length, so choosing the smallest next node each step is lexicographic.
    path = [source]
    while path[-1] != target:
        u = path[-1]
        path.append(min(v for v in graph[u] if v in useful and tight(u, v)))
    return best[target][0], path
