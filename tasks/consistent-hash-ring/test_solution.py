import hashlib
from collections import Counter

import pytest

from solution import HashRing, ring_hash

MOD = 2**64


def h(text):
    return int.from_bytes(hashlib.md5(text.encode("utf-8")).digest()[:8], "big")


def oracle_walk(nodes, vnodes, key):
    """All points ordered by clockwise distance from the key (0 = exactly on it), ties by node name."""
    position = h(key)
    points = [(h(f"{node}#{i}"), node) for node, weight in nodes.items() for i in range(vnodes * weight)]
    return [node for _, _, node in sorted(((p - position) % MOD, p, node) for p, node in points)]


def oracle_owner(nodes, vnodes, key):
    return oracle_walk(nodes, vnodes, key)[0]


def oracle_replicas(nodes, vnodes, key, count):
    found = []
    for node in oracle_walk(nodes, vnodes, key):
        if node not in found:
            found.append(node)
    return found[:count]


def test_ring_hash_is_md5_prefix():
    assert ring_hash("") == 0xD41D8CD98F00B204
    assert ring_hash("node-1#0") == h("node-1#0")
    assert ring_hash("ключ") == h("ключ")


def test_validation():
    with pytest.raises(ValueError):
        HashRing(vnodes=0)
    with pytest.raises(ValueError):
        HashRing(["a", "b", "a"])
    ring = HashRing(["a"])
    with pytest.raises(ValueError):
        ring.add_node("a")
    with pytest.raises(ValueError):
        ring.add_node("b", weight=0)
    with pytest.raises(KeyError):
        ring.remove_node("zz")
    with pytest.raises(ValueError):
        ring.nodes_for("k", -1)
    assert ring.nodes == ["a"]


def test_empty_ring():
    ring = HashRing()
    assert len(ring) == 0 and ring.nodes == []
    with pytest.raises(LookupError):
        ring.node_for("k")
    with pytest.raises(LookupError):
        ring.nodes_for("k", 2)
    assert ring.nodes_for("k", 0) == []


def test_membership_and_sorted_nodes():
    ring = HashRing(["c", "a"], vnodes=5)
    ring.add_node("b", weight=2)
    assert ring.nodes == ["a", "b", "c"] and len(ring) == 3
    assert "b" in ring and "d" not in ring
    ring.remove_node("a")
    assert ring.nodes == ["b", "c"] and "a" not in ring


def test_owner_matches_oracle():
    nodes = {"alpha": 1, "beta": 2, "gamma": 1}
    ring = HashRing(vnodes=10)
    for node, weight in nodes.items():
        ring.add_node(node, weight)
    for i in range(400):
        key = f"user:{i}"
        assert ring.node_for(key) == oracle_owner(nodes, 10, key), key


def test_key_exactly_on_a_point_belongs_to_it():
    ring = HashRing(["A", "B", "C"], vnodes=20)
    for node in "ABC":
        for i in range(20):
            assert ring.node_for(f"{node}#{i}") == node


def test_wrap_around_past_the_largest_point():
    nodes = {"n1": 1, "n2": 1}
    ring = HashRing(nodes, vnodes=4)
    largest = max(h(f"{n}#{i}") for n in nodes for i in range(4))
    smallest_owner = min((h(f"{n}#{i}"), n) for n in nodes for i in range(4))[1]
    beyond = [k for k in (f"k{i}" for i in range(5000)) if h(k) > largest]
    assert beyond, "test setup: expected some keys past the largest point"
    for key in beyond:
        assert ring.node_for(key) == smallest_owner


def test_replicas():
    nodes = {"r1": 1, "r2": 1, "r3": 1, "r4": 1}
    ring = HashRing(nodes, vnodes=8)
    for i in range(150):
        key = f"obj{i}"
        replicas = ring.nodes_for(key, 3)
        assert replicas == oracle_replicas(nodes, 8, key, 3)
        assert replicas[0] == ring.node_for(key)
        assert len(set(replicas)) == 3
    assert sorted(ring.nodes_for("x", 10)) == ["r1", "r2", "r3", "r4"]
    assert ring.nodes_for("x", 0) == []


def test_adding_a_node_moves_only_keys_to_it():
    ring = HashRing([f"cache{i}" for i in range(5)])
    keys = [f"item-{i}" for i in range(10_000)]
    before = {k: ring.node_for(k) for k in keys}
    ring.add_node("cache5")
    after = {k: ring.node_for(k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "cache5" for k in moved)
    assert 0.10 < len(moved) / len(keys) < 0.25


def test_removing_a_node_moves_only_its_keys_and_re_adding_restores():
    ring = HashRing([f"cache{i}" for i in range(5)])
    keys = [f"item-{i}" for i in range(5000)]
    before = {k: ring.node_for(k) for k in keys}
    ring.remove_node("cache2")
    after = {k: ring.node_for(k) for k in keys}
    for k in keys:
        if before[k] != "cache2":
            assert after[k] == before[k]
        else:
            assert after[k] != "cache2"
    ring.add_node("cache2")
    assert {k: ring.node_for(k) for k in keys} == before


def test_weights_shift_load():
    ring = HashRing(vnodes=100)
    ring.add_node("small")
    ring.add_node("big", weight=3)
    load = Counter(ring.node_for(f"key{i}") for i in range(8000))
    share = load["big"] / 8000
    assert 0.65 < share < 0.85
