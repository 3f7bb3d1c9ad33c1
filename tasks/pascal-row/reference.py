def _check(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def pascal_row(n: int) -> list[int]:
    n = _check(n)
    row = [1]
    for k in range(n):
        row.append(row[-1] * (n - k) // (k + 1))
    return row


def pascal_triangle(rows: int) -> list[list[int]]:
    rows = _check(rows)
    triangle: list[list[int]] = []
    for _ in range(rows):
        if not triangle:
            triangle.append([1])
        else:
            prev = triangle[-1]
            triangle.append([1] + [a + b for a, b in zip(prev, prev[1:])] + [1])
    return triangle
