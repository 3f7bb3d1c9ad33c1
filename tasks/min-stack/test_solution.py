import random

import pytest

from solution import MinStack


class Counted:
    """A value that counts every comparison made with it."""

    comparisons = 0

    def __init__(self, value):
        self.value = value

    def _cmp(op):
        def method(self, other):
            Counted.comparisons += 1
            return op(self.value, other.value)

        return method

    __lt__ = _cmp(lambda a, b: a < b)
    __le__ = _cmp(lambda a, b: a <= b)
    __gt__ = _cmp(lambda a, b: a > b)
    __ge__ = _cmp(lambda a, b: a >= b)
    __eq__ = _cmp(lambda a, b: a == b)
    __ne__ = _cmp(lambda a, b: a != b)
    __hash__ = None


def test_push_pop_peek_order():
    s = MinStack()
    for v in [5, 1, 4]:
        s.push(v)
    assert len(s) == 3
    assert s.peek() == 4
    assert s.pop() == 4
    assert s.pop() == 1
    assert s.pop() == 5
    assert len(s) == 0 and not s


def test_min_tracks_pushes_and_pops():
    s = MinStack()
    s.push(5)
    assert s.min() == 5
    s.push(7)
    assert s.min() == 5
    s.push(2)
    assert s.min() == 2
    s.push(3)
    assert s.min() == 2
    s.pop()
    s.pop()
    assert s.min() == 5


def test_duplicate_minimums():
    s = MinStack()
    s.push(3)
    s.push(1)
    s.push(1)
    s.push(2)
    s.pop()
    assert s.min() == 1
    s.pop()
    assert s.min() == 1
    s.pop()
    assert s.min() == 3


def test_empty_errors_and_recovery():
    s = MinStack()
    for op in (s.pop, s.peek, s.min):
        with pytest.raises(IndexError):
            op()
    s.push("b")
    s.push("a")
    assert s.min() == "a"
    s.pop()
    s.pop()
    with pytest.raises(IndexError):
        s.min()
    s.push(0.5)
    assert s.min() == 0.5 and s.peek() == 0.5


def test_truthiness():
    s = MinStack()
    assert not s
    s.push(0)
    assert s
    assert len(s) == 1


def test_against_list_oracle():
    rng = random.Random(8)
    s = MinStack()
    model = []
    for _ in range(3000):
        if model and rng.random() < 0.45:
            assert s.pop() == model.pop()
        else:
            v = rng.randint(0, 20)
            s.push(v)
            model.append(v)
        assert len(s) == len(model)
        if model:
            assert s.min() == min(model)
            assert s.peek() == model[-1]


def test_constant_comparisons():
    rng = random.Random(4)
    s = MinStack()
    values = [Counted(rng.randint(0, 50)) for _ in range(2000)]
    for v in values:
        Counted.comparisons = 0
        s.push(v)
        assert Counted.comparisons <= 2
    for _ in range(1000):
        for op in (s.min, s.peek, s.__len__, s.pop):
            Counted.comparisons = 0
            op()
            assert Counted.comparisons <= 2, op.__name__
