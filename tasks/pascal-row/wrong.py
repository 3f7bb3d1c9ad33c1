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
        row.append(int(row[-1] * (n - k) / (k + 1)))
    return row


def pascal_triangle(rows: int) -> list[list[int]]:
    return [pascal_row(r) for r in range(_check(rows))]
