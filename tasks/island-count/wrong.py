def _validate(grid: list[str]) -> None:
    if grid and any(len(row) != len(grid[0]) for row in grid):
        raise ValueError("all rows must have the same length")
    for row in grid:
        if set(row) - {"#", "."}:
            raise ValueError(f"unexpected character in row {row!r}")


def island_sizes(grid: list[str]) -> list[int]:
    _validate(grid)
    rows = len(grid)
    cols = len(grid[0]) if grid else 0
    seen = [[False] * cols for _ in range(rows)]
    sizes = []
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] != "#" or seen[r][c]:
                continue
            seen[r][c] = True
            stack = [(r, c)]
            size = 0
            while stack:
                y, x = stack.pop()
                size += 1
                for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
                    if ny < rows and nx < cols and grid[ny][nx] == "#" and not seen[ny][nx]:
                        seen[ny][nx] = True
                        stack.append((ny, nx))
            sizes.append(size)
    return sorted(sizes, reverse=True)


def count_islands(grid: list[str]) -> int:
    return len(island_sizes(grid))
