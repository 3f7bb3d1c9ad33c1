from collections import deque

_ORTHOGONAL = ((-1, 0), (1, 0), (0, -1), (0, 1))
_DIAGONAL = ((-1, -1), (-1, 1), (1, -1), (1, 1))


def shortest_path(
    grid: list[str],
    start: tuple[int, int],
    goal: tuple[int, int],
    diagonal: bool = False,
) -> list[tuple[int, int]] | None:
    if not grid or not grid[0]:
        raise ValueError("empty grid")
    rows, cols = len(grid), len(grid[0])
    for row in grid:
        if len(row) != cols:
            raise ValueError("rows of different lengths")
        if set(row) - {".", "#"}:
            raise ValueError(f"unexpected character in row {row!r}")

    def free(r: int, c: int) -> bool:
        return 0 <= r < rows and 0 <= c < cols and grid[r][c] == "."

    for name, (r, c) in (("start", start), ("goal", goal)):
        if not free(r, c):
            raise ValueError(f"{name} {(r, c)} is outside the grid or on a wall")
    start, goal = tuple(start), tuple(goal)
    previous: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            path = []
            node: tuple[int, int] | None = cell
            while node is not None:
                path.append(node)
                node = previous[node]
            return path[::-1]
        r, c = cell
        moves = [(dr, dc) for dr, dc in _ORTHOGONAL]
        if diagonal:
            moves += [(dr, dc) for dr, dc in _DIAGONAL if free(r + dr, c) and free(r, c + dc)]
        for dr, dc in moves:
            nxt = (r + dr, c + dc)
            if nxt not in previous and free(*nxt):
                previous[nxt] = cell
                queue.append(nxt)
    return None
