import math

import pytest

from solution import pascal_row, pascal_triangle


def test_small_rows():
    assert pascal_row(0) == [1]
    assert pascal_row(1) == [1, 1]
    assert pascal_row(4) == [1, 4, 6, 4, 1]
    assert pascal_row(10)[5] == 252


def test_row_is_exact_for_large_n():
    for n in [60, 100, 500]:
        assert pascal_row(n) == [math.comb(n, k) for k in range(n + 1)], n


def test_row_3000_exact():
    row = pascal_row(3000)
    assert len(row) == 3001
    assert row[1500] == math.comb(3000, 1500)
    assert all(type(x) is int for x in row)
    assert sum(row) == 2**3000


def test_triangle():
    assert pascal_triangle(0) == []
    assert pascal_triangle(1) == [[1]]
    assert pascal_triangle(3) == [[1], [1, 1], [1, 2, 1]]
    tri = pascal_triangle(30)
    assert len(tri) == 30
    for n, row in enumerate(tri):
        assert row == [math.comb(n, k) for k in range(n + 1)]


def test_triangle_rows_are_independent():
    tri = pascal_triangle(4)
    tri[1].append(99)
    tri[2][0] = 7
    assert tri[0] == [1]
    assert tri[3] == [1, 3, 3, 1]


def test_negative_raises_value_error():
    with pytest.raises(ValueError):
        pascal_row(-1)
    with pytest.raises(ValueError):
        pascal_triangle(-3)


def test_non_int_raises_type_error():
    for bad in [2.0, "3", None, True]:
        with pytest.raises(TypeError):
            pascal_row(bad)
        with pytest.raises(TypeError):
            pascal_triangle(bad)
