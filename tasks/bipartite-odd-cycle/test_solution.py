import random
from collections import deque

import pytest

from solution import bipartition


def assert_odd_cycle(n, edges, cycle):
    edge_set = {frozenset(e) for e in edges}
    assert len(cycle) % 2 == 1
    assert len(set(cycle)) == len(cycle), f"cycle repeats a vertex: {cycle}"
    assert all(0 <= v < n for v in cycle)
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        assert frozenset((a, b)) in edge_set, f"{a}-{b} is not an edge"


def oracle_colours(n, edges):
    adjacency = [[] for _ in range(n)]
    for u, v in edges:
        adjacency[u].append(v)
        adjacency[v].append(u)
    colour = [-1] * n
    for root in range(n):
        if colour[root] == -1:
            colour[root] = 0
            queue = deque([root])
            while queue:
                u = queue.popleft()
                for v in adjacency[u]:
                    if colour[v] == -1:
                        colour[v] = 1 - colour[u]
                        queue.append(v)
                    elif colour[v] == colour[u]:
                        return None
    return colour


def test_even_cycle_and_isolated():
    ok, colours = bipartition(5, [(0, 1), (1, 2), (2, 3), (3, 0)])
    assert ok and colours == [0, 1, 0, 1, 0]


def test_smallest_vertex_gets_zero():
    ok, colours = bipartition(6, [(5, 4), (4, 3), (2, 1)])
    assert ok and colours == [0, 0, 1, 0, 1, 0]


def test_empty_graph():
    assert bipartition(0, []) == (True, [])
    assert bipartition(3, []) == (True, [0, 0, 0])


def test_triangle():
    edges = [(0, 1), (1, 2), (2, 0)]
    ok, cycle = bipartition(3, edges)
    assert not ok
    assert_odd_cycle(3, edges, cycle)
    assert sorted(cycle) == [0, 1, 2]


def test_self_loop():
    edges = [(0, 1), (2, 2)]
    assert bipartition(3, edges) == (False, [2])


def test_duplicate_edges_are_fine():
    ok, colours = bipartition(2, [(0, 1), (1, 0), (0, 1)])
    assert ok and colours == [0, 1]


def test_odd_cycle_away_from_the_root():
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 6)]
    n = 7
    ok, colours = bipartition(n, edges)
    assert ok and colours == [0, 1, 0, 0, 1, 1, 0]
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 5), (4, 5)]
    ok, cycle = bipartition(6, edges)
    assert not ok
    assert_odd_cycle(6, edges, cycle)
    assert sorted(cycle) == [1, 2, 3, 4, 5]
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 2)]
    ok, cycle = bipartition(5, edges)
    assert not ok
    assert_odd_cycle(5, edges, cycle)
    assert sorted(cycle) == [2, 3, 4]


def test_second_component_not_bipartite():
    edges = [(0, 1), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 2)]
    assert bipartition(8, edges) == (True, [0, 1, 0, 1, 0, 1, 0, 1])
    edges = [(0, 1), (2, 3), (3, 4), (4, 5), (5, 6), (6, 2)]
    ok, cycle = bipartition(7, edges)
    assert not ok
    assert_odd_cycle(7, edges, cycle)


@pytest.mark.parametrize("n, edges", [(-1, []), (2, [(0, 2)]), (2, [(-1, 0)]), (0, [(0, 0)])])
def test_errors(n, edges):
    with pytest.raises(ValueError):
        bipartition(n, edges)


def test_random_graphs():
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 14)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 2 * n))]
        edges = [e for e in edges if e[0] != e[1] or rng.random() < 0.1]
        expected = oracle_colours(n, edges)
        ok, result = bipartition(n, edges)
        if expected is None:
            assert not ok
            assert_odd_cycle(n, edges, result)
        else:
            assert ok and result == expected


def test_long_path_is_iterative():
    n = 100_000
    edges = [(i, i + 1) for i in range(n - 1)]
    ok, colours = bipartition(n, edges)
    assert ok and colours[:4] == [0, 1, 0, 1] and colours[-1] == (n - 1) % 2
    edges.append((n - 1, n - 3))
    ok, cycle = bipartition(n, edges)
    assert not ok and sorted(cycle) == [n - 3, n - 2, n - 1]
