def flatten(items: list | tuple, depth: int | None = None) -> list:
    if not isinstance(items, list | tuple):
        raise TypeError(f"expected a list or tuple, got {type(items).__name__}")
    if depth is not None and depth < 0:
        raise ValueError("depth must be >= 0")
    out: list = []
    # Explicit stack of (iterator, remaining depth) so deep nesting never hits the recursion limit.
    stack = [(iter(items), depth)]
    while stack:
        iterator, remaining = stack[-1]
        for item in iterator:
            if isinstance(item, list | tuple) and (remaining is None or remaining > 0):
                stack.append((iter(item), None if remaining is None else remaining - 1))
                break
            out.append(item)
        else:
            stack.pop()
    return out
