import random
from collections import deque

import pytest

from solution import shortest_path


def oracle_distance(grid, start, goal, diagonal):
    rows, cols = len(grid), len(grid[0])

    def free(r, c):
        return 0 <= r < rows and 0 <= c < cols and grid[r][c] == "."

    dist = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                if (dr, dc) == (0, 0) or (dr and dc and not diagonal):
                    continue
                if dr and dc and not (free(r + dr, c) and free(r, c + dc)):
                    continue
                n = (r + dr, c + dc)
                if free(*n) and n not in dist:
                    dist[n] = dist[(r, c)] + 1
                    queue.append(n)
    return dist.get(goal)


def assert_valid(grid, path, start, goal, diagonal):
    rows, cols = len(grid), len(grid[0])
    assert path[0] == tuple(start) and path[-1] == tuple(goal)
    for r, c in path:
        assert 0 <= r < rows and 0 <= c < cols and grid[r][c] == "."
    for (r1, c1), (r2, c2) in zip(path, path[1:]):
        dr, dc = r2 - r1, c2 - c1
        assert max(abs(dr), abs(dc)) == 1
        if dr and dc:
            assert diagonal
            assert grid[r1 + dr][c1] == "." and grid[r1][c1 + dc] == "."


def test_straight_line_and_same_cell():
    grid = ["....."]
    assert shortest_path(grid, (0, 0), (0, 4)) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]
    assert shortest_path(grid, (0, 2), (0, 2)) == [(0, 2)]


def test_around_a_wall():
    grid = [
        "....",
        ".##.",
        ".#..",
        "....",
    ]
    path = shortest_path(grid, (2, 0), (2, 2))
    assert_valid(grid, path, (2, 0), (2, 2), False)
    assert len(path) == 5


def test_unreachable():
    grid = [
        ".#.",
        "##.",
        "...",
    ]
    assert shortest_path(grid, (0, 0), (2, 2)) is None
    assert shortest_path(grid, (0, 0), (2, 2), diagonal=True) is None


def test_diagonal_moves():
    grid = ["...", "...", "..."]
    path = shortest_path(grid, (0, 0), (2, 2), diagonal=True)
    assert path == [(0, 0), (1, 1), (2, 2)]
    assert len(shortest_path(grid, (0, 0), (2, 2))) == 5


def test_no_corner_cutting():
    grid = [
        ".#",
        "..",
    ]
    path = shortest_path(grid, (0, 0), (1, 1), diagonal=True)
    assert path == [(0, 0), (1, 0), (1, 1)]
    grid = [
        ".#.",
        "#..",
        "...",
    ]
    assert shortest_path(grid, (0, 0), (2, 2), diagonal=True) is None
    path = shortest_path(grid, (1, 1), (0, 2), diagonal=True)
    assert path == [(1, 1), (1, 2), (0, 2)]


@pytest.mark.parametrize(
    "grid, start, goal",
    [
        ([], (0, 0), (0, 0)),
        ([""], (0, 0), (0, 0)),
        (["..", "."], (0, 0), (0, 1)),
        ([".x"], (0, 0), (0, 1)),
        (["..", ".."], (2, 0), (0, 0)),
        (["..", ".."], (0, 0), (0, -1)),
        (["#.", ".."], (0, 0), (1, 1)),
        ([".#", ".."], (0, 0), (0, 1)),
    ],
)
def test_errors(grid, start, goal):
    with pytest.raises(ValueError):
        shortest_path(grid, start, goal)


def test_random_grids_against_oracle():
    rng = random.Random(42)
    for trial in range(150):
        rows, cols = rng.randint(1, 9), rng.randint(1, 9)
        grid = ["".join("#" if rng.random() < 0.3 else "." for _ in range(cols)) for _ in range(rows)]
        free = [(r, c) for r in range(rows) for c in range(cols) if grid[r][c] == "."]
        if not free:
            continue
        start, goal = rng.choice(free), rng.choice(free)
        for diagonal in (False, True):
            expected = oracle_distance(grid, start, goal, diagonal)
            path = shortest_path(grid, start, goal, diagonal)
            if expected is None:
                assert path is None
            else:
                assert path is not None
                assert_valid(grid, path, start, goal, diagonal)
                assert len(path) == expected + 1


def test_large_open_grid():
    grid = ["." * 300 for _ in range(300)]
    grid[150] = "#" * 299 + "."
    path = shortest_path(grid, (0, 0), (299, 0))
    assert len(path) == 299 + 299 + 299 + 1
    path = shortest_path(grid, (0, 0), (299, 299), diagonal=True)
    assert_valid(grid, path, (0, 0), (299, 299), True)
