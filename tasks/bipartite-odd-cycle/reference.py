from collections import deque


def bipartition(n: int, edges: list[tuple[int, int]]) -> tuple[bool, list[int]]:
    if n < 0:
        raise ValueError("n must be >= 0")
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        if not (0 <= u < n and 0 <= v < n):
            raise ValueError(f"edge {(u, v)} has an endpoint outside 0..{n - 1}")
        adjacency[u].append(v)
        adjacency[v].append(u)
    colour = [-1] * n
    parent = [-1] * n
    depth = [0] * n
    for root in range(n):
        if colour[root] != -1:
            continue
        colour[root] = 0
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for v in adjacency[u]:
                if colour[v] == -1:
                    colour[v] = 1 - colour[u]
                    parent[v] = u
                    depth[v] = depth[u] + 1
                    queue.append(v)
                elif colour[v] == colour[u]:
                    return False, _odd_cycle(u, v, parent, depth)
    return True, colour


def _odd_cycle(u: int, v: int, parent: list[int], depth: list[int]) -> list[int]:
    """Both tree paths up to the lowest common ancestor plus the edge u-v close an odd cycle."""
    left, right = [u], [v]
    a, b = u, v
    while depth[a] > depth[b]:
        a = parent[a]
        left.append(a)
    while depth[b] > depth[a]:
        b = parent[b]
        right.append(b)
    while a != b:
        a, b = parent[a], parent[b]
        left.append(a)
        right.append(b)
    return left + right[-2::-1]
