import random

import pytest

from solution import dedupe


def test_keep_first_default():
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert dedupe(["Ann", "bob", "ann", "Bob"], key=str.lower) == ["Ann", "bob"]
    assert dedupe([]) == []


def test_keep_last_uses_positions_of_kept_items():
    assert dedupe([1, 2, 1], keep="last") == [2, 1]
    assert dedupe(["a1", "b1", "a2"], key=lambda s: s[0], keep="last") == ["b1", "a2"]
    assert dedupe([3, 1, 3, 2, 1], keep="last") == [3, 2, 1]


def test_generator_and_key_called_once():
    calls = []

    def key(x):
        calls.append(x)
        return x % 3

    gen = (n for n in range(10))
    assert dedupe(gen, key=key) == [0, 1, 2]
    assert calls == list(range(10))
    calls.clear()
    assert dedupe(iter(range(10)), key=key, keep="last") == [7, 8, 9]
    assert len(calls) == 10


def test_unhashable_keys():
    rows = [{"id": [1]}, {"id": [2]}, {"id": [1]}, {"id": {"x": 1}}, {"id": {"x": 1}}]
    assert dedupe(rows, key=lambda r: r["id"]) == [rows[0], rows[1], rows[3]]
    assert dedupe(rows, key=lambda r: r["id"], keep="last") == [rows[1], rows[2], rows[4]]
    assert dedupe([[1], [1], [2]]) == [[1], [2]]


def test_mixed_hashable_and_unhashable():
    items = [1, [1], "a", [1], 1, {2}, "a", {2}]
    assert dedupe(items) == [1, [1], "a", {2}]
    assert dedupe(items, keep="last") == [[1], 1, "a", {2}]


def test_bad_keep_before_consuming():
    consumed = []

    def gen():
        consumed.append(True)
        yield 1

    with pytest.raises(ValueError):
        dedupe(gen(), keep="middle")
    assert consumed == []


def test_input_not_modified_and_new_list():
    data = [1, 1, 2]
    result = dedupe(data)
    assert data == [1, 1, 2]
    result.append(9)
    assert data == [1, 1, 2]
    unique = [1, 2, 3]
    assert dedupe(unique) is not unique


def test_against_oracle():
    rng = random.Random(5)
    for _ in range(300):
        data = [rng.randint(0, 6) for _ in range(rng.randint(0, 20))]
        first = [x for i, x in enumerate(data) if x not in data[:i]]
        last = [x for i, x in enumerate(data) if x not in data[i + 1 :]]
        assert dedupe(data) == first
        assert dedupe(data, keep="last") == last
        as_lists = [[x] for x in data]
        assert dedupe(as_lists, keep="last") == [[x] for x in last]


def test_linear_for_hashable():
    data = list(range(200_000)) * 2
    assert dedupe(data) == list(range(200_000))
    assert dedupe(data, key=lambda x: -x, keep="last") == list(range(200_000))
