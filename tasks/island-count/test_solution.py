import random

import pytest

from solution import count_islands, island_sizes


def test_example():
    grid = [
        "##..#",
        "#...#",
        "..#..",
        ".....",
        "##.##",
    ]
    assert count_islands(grid) == 5
    assert island_sizes(grid) == [3, 2, 2, 2, 1]


def test_diagonal_does_not_connect():
    assert count_islands(["#.", ".#"]) == 2
    assert island_sizes(["#.#", ".#.", "#.#"]) == [1, 1, 1, 1, 1]


def test_no_wraparound():
    assert count_islands(["#.", "..", "#."]) == 2
    assert count_islands(["#..#"]) == 2
    assert island_sizes(["#..#", "....", "#..#"]) == [1, 1, 1, 1]


def test_empty_and_all_water():
    assert count_islands([]) == 0
    assert island_sizes([]) == []
    assert count_islands(["", ""]) == 0
    assert count_islands(["...", "..."]) == 0


def test_all_land():
    assert island_sizes(["###", "###"]) == [6]


def test_ring_is_one_island():
    assert island_sizes(["#####", "#...#", "#.#.#", "#...#", "#####"]) == [16, 1]


def test_invalid_grids():
    with pytest.raises(ValueError):
        count_islands(["##", "#"])
    with pytest.raises(ValueError):
        count_islands(["#x"])
    with pytest.raises(ValueError):
        island_sizes(["# "])


def test_large_snake():
    n = 500
    rows = []
    for r in range(n):
        if r % 2 == 0:
            rows.append("#" * n)
        elif r % 4 == 1:
            rows.append("." * (n - 1) + "#")
        else:
            rows.append("#" + "." * (n - 1))
    sizes = island_sizes(rows)
    assert sizes == [n * (n // 2) + n // 2]


def oracle(grid):
    # Union-find over land cells.
    parent = {}

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch == "#":
                parent[(r, c)] = (r, c)
    for r, c in list(parent):
        for nb in ((r + 1, c), (r, c + 1)):
            if nb in parent:
                parent[root(nb)] = root((r, c))
    counts = {}
    for cell in parent:
        counts[root(cell)] = counts.get(root(cell), 0) + 1
    return sorted(counts.values(), reverse=True)


def test_against_oracle():
    rng = random.Random(21)
    for _ in range(200):
        h, w = rng.randint(1, 8), rng.randint(1, 8)
        grid = ["".join(rng.choice("#..") for _ in range(w)) for _ in range(h)]
        expected = oracle(grid)
        assert island_sizes(grid) == expected, grid
        assert count_islands(grid) == len(expected)
