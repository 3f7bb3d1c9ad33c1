import random

import pytest

from solution import BTree


def check_invariants(tree, t):
    root = tree.root
    if len(tree) == 0:
        assert list(root.keys) == [] and list(root.children) == [], "an empty tree is a bare leaf"
        assert tree.height == 0
        return
    leaf_depths = set()
    total = 0
    stack = [(root, 0, None, None)]
    while stack:
        node, depth, lo, hi = stack.pop()
        keys, values, children = list(node.keys), list(node.values), list(node.children)
        assert len(keys) == len(values)
        n = len(keys)
        if node is root:
            assert 1 <= n <= 2 * t - 1, f"root holds {n} keys"
        else:
            assert t - 1 <= n <= 2 * t - 1, f"node holds {n} keys (t={t})"
        assert all(a < b for a, b in zip(keys, keys[1:])), "keys not strictly increasing"
        if lo is not None:
            assert lo < keys[0]
        if hi is not None:
            assert keys[-1] < hi
        total += n
        if children:
            assert len(children) == n + 1, "internal node needs keys + 1 children"
            bounds = [lo] + keys + [hi]
            for i, child in enumerate(children):
                stack.append((child, depth + 1, bounds[i], bounds[i + 1]))
        else:
            leaf_depths.add(depth)
    assert len(leaf_depths) == 1, f"leaves at depths {sorted(leaf_depths)}"
    assert leaf_depths == {tree.height}
    assert total == len(tree)


def test_min_degree_validation():
    for bad in (1, 0, -2):
        with pytest.raises(ValueError):
            BTree(bad)


def test_empty_tree():
    tree = BTree()
    check_invariants(tree, 2)
    assert len(tree) == 0 and list(tree) == [] and tree.items() == []
    assert tree.get(1) is None and tree.get(1, "x") == "x" and 1 not in tree
    with pytest.raises(KeyError):
        tree.delete(1)
    assert tree.range(0, 10) == []


def test_insert_get_overwrite():
    tree = BTree(2)
    for key in [5, 1, 9, 3, 7]:
        tree.insert(key, str(key))
    tree.insert(3, "three")
    assert len(tree) == 5
    assert tree.get(3) == "three" and tree.get(9) == "9"
    assert list(tree) == [1, 3, 5, 7, 9]
    assert tree.items() == [(1, "1"), (3, "three"), (5, "5"), (7, "7"), (9, "9")]
    check_invariants(tree, 2)


@pytest.mark.parametrize("t", [2, 3, 5])
def test_sequential_inserts_keep_shape(t):
    tree = BTree(t)
    for key in range(1000):
        tree.insert(key, key * 10)
        if key % 97 == 0:
            check_invariants(tree, t)
    check_invariants(tree, t)
    assert list(tree) == list(range(1000))
    assert tree.height <= 9
    for key in range(999, -1, -1):
        tree.insert(key, -key)
    assert tree.get(500) == -500 and len(tree) == 1000


def test_delete_down_to_empty_shrinks_root():
    tree = BTree(2)
    for key in range(1, 11):
        tree.insert(key, key)
    assert tree.height >= 1
    for key in range(1, 11):
        tree.delete(key)
        check_invariants(tree, 2)
        assert key not in tree
    assert len(tree) == 0


def test_delete_missing_leaves_tree_unchanged():
    tree = BTree(2)
    for key in range(0, 40, 2):
        tree.insert(key, key)
    before = tree.items()
    with pytest.raises(KeyError):
        tree.delete(7)
    assert tree.items() == before
    check_invariants(tree, 2)


@pytest.mark.parametrize("t", [2, 3])
def test_delete_in_random_order(t):
    rng = random.Random(t)
    keys = list(range(300))
    tree = BTree(t)
    for key in rng.sample(keys, len(keys)):
        tree.insert(key, key)
    remaining = set(keys)
    for key in rng.sample(keys, len(keys)):
        tree.delete(key)
        remaining.discard(key)
        check_invariants(tree, t)
        assert list(tree) == sorted(remaining)


@pytest.mark.parametrize("t, seed", [(2, 0), (2, 1), (3, 2), (4, 3)])
def test_random_operations_against_dict(t, seed):
    rng = random.Random(seed)
    tree = BTree(t)
    oracle = {}
    for step in range(1500):
        key = rng.randint(0, 120)
        r = rng.random()
        if r < 0.5:
            tree.insert(key, step)
            oracle[key] = step
        elif r < 0.85:
            if key in oracle:
                tree.delete(key)
                del oracle[key]
            else:
                with pytest.raises(KeyError):
                    tree.delete(key)
        else:
            assert tree.get(key, "missing") == oracle.get(key, "missing")
        check_invariants(tree, t)
        assert len(tree) == len(oracle)
    assert tree.items() == sorted(oracle.items())


def test_range_queries():
    tree = BTree(3)
    for key in range(0, 200, 5):
        tree.insert(key, key // 5)
    assert tree.range(12, 31) == [(15, 3), (20, 4), (25, 5), (30, 6)]
    assert tree.range(15, 30) == [(15, 3), (20, 4), (25, 5)]
    assert tree.range(-100, 6) == [(0, 0), (5, 1)]
    assert tree.range(196, 1000) == []
    assert tree.range(50, 50) == [] and tree.range(60, 40) == []
    assert len(tree.range(0, 200)) == 40


def test_string_keys():
    tree = BTree(2)
    words = "the quick brown fox jumps over the lazy dog".split()
    for i, word in enumerate(words):
        tree.insert(word, i)
    assert list(tree) == sorted(set(words))
    assert tree.get("the") == 6
    tree.delete("fox")
    check_invariants(tree, 2)
    assert "fox" not in tree and len(tree) == 7
