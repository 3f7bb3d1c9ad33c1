import math
import random

import pytest

from solution import shortest_path


def brute_force(edges, source, target):
    """Minimum (distance, hops, route) over all simple routes; enough because weights are >= 0."""
    graph = {}
    for u, v, w in edges:
        graph.setdefault(u, []).append((v, w))
    if source == target:
        return 0, [source]
    best = None
    stack = [(source, 0, [source])]
    while stack:
        u, dist, route = stack.pop()
        if u == target:
            key = (dist, len(route), route)
            if best is None or key < best:
                best = key
            continue
        for v, w in graph.get(u, []):
            if v not in route:
                stack.append((v, dist + w, route + [v]))
    return (math.inf, []) if best is None else (best[0], best[2])


def test_simple_route():
    edges = [("a", "b", 1), ("b", "c", 2), ("a", "c", 5)]
    assert shortest_path(edges, "a", "c") == (3, ["a", "b", "c"])


def test_directed_only():
    edges = [("a", "b", 1)]
    assert shortest_path(edges, "b", "a") == (math.inf, [])


def test_source_equals_target():
    assert shortest_path([], "x", "x") == (0, ["x"])
    assert shortest_path([("x", "y", 3), ("y", "x", 3)], "x", "x") == (0, ["x"])


def test_unreachable_and_unknown_nodes():
    edges = [("a", "b", 1), ("c", "d", 1)]
    assert shortest_path(edges, "a", "d") == (math.inf, [])
    assert shortest_path(edges, "a", "zz") == (math.inf, [])
    assert shortest_path(edges, "zz", "a") == (math.inf, [])


def test_negative_weight_anywhere_is_rejected():
    with pytest.raises(ValueError):
        shortest_path([("a", "b", 1), ("x", "y", -0.5)], "a", "b")


def test_iterator_input_and_parallel_edges():
    edges = iter([("a", "b", 7), ("a", "b", 2), ("b", "c", 1), ("a", "b", 4)])
    assert shortest_path(edges, "a", "c") == (3, ["a", "b", "c"])


def test_zero_weights_and_zero_cycles():
    edges = [("s", "a", 0), ("a", "b", 0), ("b", "a", 0), ("b", "t", 0), ("s", "t", 1)]
    assert shortest_path(edges, "s", "t") == (0, ["s", "a", "b", "t"])


def test_ties_prefer_fewest_edges():
    edges = [("s", "a", 1), ("a", "t", 1), ("s", "t", 2)]
    assert shortest_path(edges, "s", "t") == (2, ["s", "t"])
    edges = [("s", "a", 0), ("a", "b", 0), ("b", "t", 3), ("s", "z", 3), ("z", "t", 0)]
    assert shortest_path(edges, "s", "t") == (3, ["s", "z", "t"])


def test_ties_then_lexicographic():
    edges = [("s", "m", 1), ("m", "t", 1), ("s", "c", 1), ("c", "t", 1), ("s", "x", 1), ("x", "t", 1)]
    assert shortest_path(edges, "s", "t") == (2, ["s", "c", "t"])
    edges = [("s", "b", 1), ("b", "z", 1), ("z", "t", 1), ("s", "c", 1), ("c", "a", 1), ("a", "t", 1)]
    assert shortest_path(edges, "s", "t") == (3, ["s", "b", "z", "t"])


def test_float_weights():
    edges = [("a", "b", 0.5), ("b", "c", 0.25), ("a", "c", 1.0)]
    assert shortest_path(edges, "a", "c") == (0.75, ["a", "b", "c"])


@pytest.mark.parametrize("seed", range(4))
def test_random_graphs_against_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(120):
        names = [chr(ord("a") + i) for i in range(rng.randint(2, 7))]
        edges = [
            (u, v, rng.randint(0, 4))
            for u in names
            for v in names
            if u != v and rng.random() < 0.4
            for _ in range(rng.choice([1, 1, 1, 2]))
        ]
        rng.shuffle(edges)
        source, target = rng.choice(names), rng.choice(names)
        assert shortest_path(edges, source, target) == brute_force(edges, source, target)


def test_large_grid():
    n = 120
    def name(i, j):
        return f"r{i:03d}c{j:03d}"
    edges = []
    for i in range(n):
        for j in range(n):
            if j + 1 < n:
                edges.append((name(i, j), name(i, j + 1), 1))
            if i + 1 < n:
                edges.append((name(i, j), name(i + 1, j), 1))
    dist, path = shortest_path(edges, name(0, 0), name(n - 1, n - 1))
    assert dist == 2 * (n - 1)
    expected = [name(0, j) for j in range(n)] + [name(i, n - 1) for i in range(1, n)]
    assert path == expected
