import copy
import random

import pytest

from solution import flatten


def test_full_flatten():
    assert flatten([1, [2, (3, [4])], "ab"]) == [1, 2, 3, 4, "ab"]
    assert flatten(()) == []
    assert flatten((1, (2,))) == [1, 2]


def test_leaves_are_kept():
    leaves = ["abc", b"xy", {"k": [1]}, {1, 2}, range(3), None, 0]
    assert flatten([leaves]) == leaves


def test_depth_limits():
    data = [1, [2, [3, [4]]]]
    assert flatten(data, depth=0) == [1, [2, [3, [4]]]]
    assert flatten(data, depth=1) == [1, 2, [3, [4]]]
    assert flatten(data, depth=2) == [1, 2, 3, [4]]
    assert flatten(data, depth=3) == [1, 2, 3, 4]
    assert flatten(data, depth=50) == [1, 2, 3, 4]


def test_surviving_containers_are_same_objects():
    inner = (3, [4])
    data = [[inner]]
    result = flatten(data, depth=1)
    assert result == [inner] and result[0] is inner


def test_empty_containers():
    assert flatten([1, [], [[]], 2]) == [1, 2]
    assert flatten([1, [], [[]], 2], depth=1) == [1, [], 2]


def test_new_list_and_input_untouched():
    data = [1, [2, [3]]]
    snapshot = copy.deepcopy(data)
    result = flatten(data, depth=0)
    assert result == data and result is not data
    flatten(data)
    assert data == snapshot


def test_subclasses_are_containers():
    class MyList(list):
        pass

    assert flatten([MyList([1, MyList([2])])]) == [1, 2]


def test_errors():
    with pytest.raises(ValueError):
        flatten([1], depth=-1)
    with pytest.raises(TypeError):
        flatten("abc")
    with pytest.raises(TypeError):
        flatten({1: 2})


def test_very_deep_nesting():
    data: list = [7]
    for _ in range(50_000):
        data = [data, 1]
    result = flatten(data)
    assert result[0] == 7 and len(result) == 50_001
    shallow = flatten(data, depth=2)
    assert len(shallow) == 4 and shallow[0] is data[0][0][0] and shallow[1:] == [1, 1, 1]


def oracle(value, depth):
    out = []
    for item in value:
        if isinstance(item, list | tuple) and (depth is None or depth > 0):
            out.extend(oracle(item, None if depth is None else depth - 1))
        else:
            out.append(item)
    return out


def test_against_oracle():
    rng = random.Random(3)

    def build(level):
        items = []
        for _ in range(rng.randint(0, 4)):
            if level < 5 and rng.random() < 0.4:
                items.append(build(level + 1) if rng.random() < 0.7 else tuple(build(level + 1)))
            else:
                items.append(rng.choice([1, "s", None, 2.5]))
        return items

    for _ in range(200):
        data = build(0)
        depth = rng.choice([None, 0, 1, 2, 3])
        assert flatten(data, depth) == oracle(data, depth)
