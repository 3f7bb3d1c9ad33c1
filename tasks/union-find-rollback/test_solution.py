import random

import pytest

from solution import RollbackUnionFind


class Oracle:
    def __init__(self, n):
        self.label = list(range(n))
        self.snapshots = []  # (token, labels), tokens in creation order; invalid ones removed

    def union(self, a, b):
        la, lb = self.label[a], self.label[b]
        if la == lb:
            return False
        self.label = [la if x == lb else x for x in self.label]
        return True

    def components(self):
        return len(set(self.label))

    def size(self, x):
        return self.label.count(self.label[x])


def assert_same_partition(uf, oracle):
    n = len(oracle.label)
    assert uf.components == oracle.components()
    groups = {}
    for x in range(n):
        groups.setdefault(oracle.label[x], []).append(x)
    for members in groups.values():
        rep = uf.find(members[0])
        assert rep in members, "representative is not a member of the set"
        for x in members:
            assert uf.find(x) == rep
            assert uf.size(x) == len(members)


def test_validation_and_empty():
    with pytest.raises(ValueError):
        RollbackUnionFind(-1)
    uf = RollbackUnionFind(0)
    assert len(uf) == 0 and uf.components == 0
    token = uf.snapshot()
    uf.rollback(token)
    with pytest.raises(IndexError):
        uf.find(0)


def test_out_of_range_elements():
    uf = RollbackUnionFind(3)
    for bad in (-1, 3, 10):
        with pytest.raises(IndexError):
            uf.find(bad)
        with pytest.raises(IndexError):
            uf.union(0, bad)
        with pytest.raises(IndexError):
            uf.connected(bad, 0)
        with pytest.raises(IndexError):
            uf.size(bad)
    assert uf.components == 3


def test_union_connected_size():
    uf = RollbackUnionFind(6)
    assert uf.union(0, 1) is True
    assert uf.union(1, 0) is False
    assert uf.union(2, 2) is False
    assert uf.union(2, 3) is True
    assert uf.union(3, 0) is True
    assert uf.connected(1, 2)
    assert not uf.connected(4, 0)
    assert uf.size(3) == 4 and uf.size(5) == 1
    assert uf.components == 3
    assert uf.find(0) in {0, 1, 2, 3}


def test_rollback_restores_state():
    uf = RollbackUnionFind(5)
    uf.union(0, 1)
    t = uf.snapshot()
    uf.union(1, 2)
    uf.union(3, 4)
    uf.union(0, 4)
    assert uf.components == 1 and uf.size(2) == 5
    uf.rollback(t)
    assert uf.components == 4
    assert uf.connected(0, 1) and not uf.connected(1, 2) and not uf.connected(3, 4)
    assert uf.size(0) == 2 and uf.size(4) == 1


def test_token_stays_valid_and_later_tokens_die():
    uf = RollbackUnionFind(4)
    t0 = uf.snapshot()
    uf.union(0, 1)
    t1 = uf.snapshot()
    uf.union(2, 3)
    t2 = uf.snapshot()
    uf.rollback(t1)
    assert uf.components == 3
    with pytest.raises(ValueError):
        uf.rollback(t2)
    uf.union(1, 2)
    uf.rollback(t1)  # again: still valid
    assert uf.components == 3 and not uf.connected(1, 2)
    uf.rollback(t0)
    assert uf.components == 4
    for dead in (t1, t2):
        with pytest.raises(ValueError):
            uf.rollback(dead)


def test_tokens_are_never_reused():
    uf = RollbackUnionFind(4)
    t0 = uf.snapshot()
    uf.union(0, 1)
    t1 = uf.snapshot()
    uf.rollback(t0)
    new_tokens = [uf.snapshot() for _ in range(3)]
    assert t1 not in new_tokens and t0 not in new_tokens
    uf.union(2, 3)
    with pytest.raises(ValueError):
        uf.rollback(t1)
    assert uf.connected(2, 3) and not uf.connected(0, 1)


def test_invalid_token_changes_nothing():
    uf = RollbackUnionFind(3)
    uf.snapshot()
    uf.union(0, 2)
    with pytest.raises(ValueError):
        uf.rollback(12345)
    assert uf.connected(0, 2) and uf.components == 2


@pytest.mark.parametrize("seed", range(6))
def test_random_against_oracle(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 12)
    uf = RollbackUnionFind(n)
    oracle = Oracle(n)
    for _ in range(700):
        r = rng.random()
        if r < 0.5:
            a, b = rng.randrange(n), rng.randrange(n)
            assert uf.union(a, b) == oracle.union(a, b)
        elif r < 0.65:
            token = uf.snapshot()
            oracle.snapshots.append((token, list(oracle.label)))
        elif r < 0.8 and oracle.snapshots:
            i = rng.randrange(len(oracle.snapshots))
            token, labels = oracle.snapshots[i]
            del oracle.snapshots[i + 1 :]
            uf.rollback(token)
            oracle.label = list(labels)
        else:
            a, b = rng.randrange(n), rng.randrange(n)
            assert uf.connected(a, b) == (oracle.label[a] == oracle.label[b])
            assert uf.size(a) == oracle.size(a)
        assert uf.components == oracle.components()
    assert_same_partition(uf, oracle)


def test_large_with_many_snapshots():
    n = 200_000
    uf = RollbackUnionFind(n)
    rng = random.Random(1)
    tokens = []
    for i in range(1, n):
        if i % 50 == 0:
            tokens.append((uf.snapshot(), i))
        uf.union(rng.randrange(i), i)
    assert uf.components == 1 and uf.size(0) == n
    for token, i in reversed(tokens[-1000:]):
        uf.rollback(token)
        assert uf.components == n - i + 1
    token, i = tokens[0]
    uf.rollback(token)
    assert uf.components == n - 49 and uf.size(n - 1) == 1
    assert uf.size(0) == 50
