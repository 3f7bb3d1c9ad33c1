import itertools
import random

import pytest

from solution import CycleError, topo_sort


def assert_real_cycle(cycle, edges):
    edge_set = set(edges)
    assert cycle, "empty cycle"
    assert len(set(cycle)) == len(cycle), f"repeated node in {cycle}"
    for u, v in zip(cycle, cycle[1:] + cycle[:1]):
        assert (u, v) in edge_set, f"{u} -> {v} is not an edge; {cycle} is not a cycle"
    assert cycle[0] == min(cycle), "cycle must start at its smallest node"


def brute_force_order(nodes, edges):
    for perm in itertools.permutations(sorted(nodes)):
        where = {n: i for i, n in enumerate(perm)}
        if all(where[u] < where[v] for u, v in edges):
            return list(perm)  # permutations of a sorted list come in lexicographic order
    return None


def test_empty_graph():
    assert topo_sort([], []) == []


def test_isolated_nodes_sorted():
    assert topo_sort(["b", "c", "a", "b"], []) == ["a", "b", "c"]


def test_example_from_ticket():
    assert topo_sort(["c", "a", "b"], [("c", "a")]) == ["b", "c", "a"]


def test_nodes_only_in_edges_and_duplicates():
    edges = [("lib", "app"), ("core", "lib"), ("core", "lib"), ("core", "app")]
    assert topo_sort(["docs"], edges) == ["core", "docs", "lib", "app"]


def test_smallest_available_first_not_depth_first():
    edges = [("a", "z"), ("b", "c")]
    assert topo_sort([], edges) == ["a", "b", "c", "z"]


def test_generators_accepted():
    nodes = (n for n in ["y", "x"])
    edges = ((u, v) for u, v in [("y", "x")])
    assert topo_sort(nodes, edges) == ["y", "x"]


def test_self_loop():
    with pytest.raises(CycleError) as info:
        topo_sort(["a", "b"], [("a", "b"), ("b", "b")])
    assert info.value.cycle == ["b"]


def test_two_cycle_is_value_error_with_message():
    with pytest.raises(ValueError) as info:
        topo_sort([], [("q", "p"), ("p", "q")])
    assert isinstance(info.value, CycleError)
    assert info.value.cycle == ["p", "q"]
    assert "p" in str(info.value) and "q" in str(info.value)


def test_cycle_without_lead_in_or_tail():
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "b"), ("d", "e"), ("e", "f"), ("0", "a")]
    with pytest.raises(CycleError) as info:
        topo_sort(["zz"], edges)
    assert info.value.cycle == ["b", "c", "d"]


def test_cycle_reached_only_through_a_long_path():
    edges = [(f"n{i}", f"n{i + 1}") for i in range(10)] + [("n10", "m"), ("m", "k"), ("k", "n10")]
    with pytest.raises(CycleError) as info:
        topo_sort([], edges)
    assert_real_cycle(info.value.cycle, edges)
    assert sorted(info.value.cycle) == ["k", "m", "n10"]


def test_random_dags_against_brute_force():
    rng = random.Random(17)
    for _ in range(150):
        names = rng.sample(list("abcdefgh"), rng.randint(1, 6))
        rank = {n: i for i, n in enumerate(rng.sample(names, len(names)))}
        edges = [(u, v) for u in names for v in names if rank[u] < rank[v] and rng.random() < 0.35]
        listed = [n for n in names if rng.random() < 0.7]
        everything = set(listed) | {x for e in edges for x in e}
        assert topo_sort(listed, edges) == brute_force_order(everything, edges)


def test_random_cyclic_graphs_report_real_cycles():
    rng = random.Random(5)
    for _ in range(200):
        names = [f"v{i}" for i in range(rng.randint(1, 9))]
        edges = [(u, v) for u in names for v in names if rng.random() < 0.2]
        everything = set(names)
        expected = brute_force_order(everything, edges) if len(names) <= 7 else None
        try:
            order = topo_sort(names, edges)
        except CycleError as error:
            assert_real_cycle(error.cycle, edges)
            if len(names) <= 7:
                assert expected is None, "reported a cycle in an acyclic graph"
        else:
            where = {n: i for i, n in enumerate(order)}
            assert sorted(order) == sorted(everything)
            assert all(where[u] < where[v] for u, v in edges)
            if len(names) <= 7:
                assert order == expected


def test_large_chain_and_large_cycle():
    n = 60_000
    names = [f"p{i:06d}" for i in range(n)]
    chain = list(zip(names, names[1:]))
    assert topo_sort(reversed(names), chain) == names
    ring = [(names[i], names[i - 1]) for i in range(n)]  # p0 -> p99999 -> ... -> p1 -> p0
    with pytest.raises(CycleError) as info:
        topo_sort([], ring)
    cycle = info.value.cycle
    assert len(cycle) == n
    assert cycle[:3] == [names[0], names[-1], names[-2]]
    assert_real_cycle(cycle, ring)
