def flatten(items: list | tuple, depth: int | None = None) -> list:
    if not isinstance(items, list | tuple):
        raise TypeError(f"expected a list or tuple, got {type(items).__name__}")
    if depth is not None and depth < 0:
        raise ValueError("depth must be >= 0")
    out: list = []
    for item in items:
        if isinstance(item, list | tuple) and (depth is None or depth > 0):
            out.extend(flatten(item, None if depth is None else depth - 1))
        else:
            out.append(item)
    return out
