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

    # Ties broken by the route itself: (distance, route) grows along every edge.
    heap = [(0, (source,))]
    settled: set[str] = set()
    while heap:
        dist, route = heapq.heappop(heap)
        u = route[-1]
        if u in settled:
            continue
        settled.add(u)
        if u == target:
            return dist, list(route)
        for v, w in graph[u].items():
            if v not in settled:
                heapq.heappush(heap, (dist + w, route + (v,)))
    return math.inf, []
