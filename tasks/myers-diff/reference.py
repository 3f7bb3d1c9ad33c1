def diff(a: list[str], b: list[str]) -> list[tuple[str, str]]:
    n, m = len(a), len(b)
    offset = n + m + 1
    v = [0] * (2 * offset + 1)
    trace: list[list[int]] = []
    final_d = 0
    for d in range(n + m + 1):
        # Save the furthest-reaching x per diagonal after step d - 1 (only diagonals -d-1..d+1 matter).
        trace.append(v[offset - d - 1 : offset + d + 2])
        reached = False
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]
            else:
                x = v[offset + k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[offset + k] = x
            if x >= n and y >= m:
                reached = True
                break
        if reached:
            final_d = d
            break

    script: list[tuple[str, str]] = []
    x, y = n, m
    for d in range(final_d, 0, -1):
        saved = trace[d]
        k = x - y
        if k == -d or (k != d and saved[d + k] < saved[d + k + 2]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = saved[d + 1 + prev_k]
        prev_y = prev_x - prev_k
        start_x, start_y = (prev_x, prev_y + 1) if prev_k == k + 1 else (prev_x + 1, prev_y)
        while x > start_x and y > start_y:
            x -= 1
            y -= 1
            script.append(("=", a[x]))
        if prev_k == k + 1:
            script.append(("+", b[prev_y]))
        else:
            script.append(("-", a[prev_x]))
        x, y = prev_x, prev_y
    while x > 0 and y > 0:
        x -= 1
        y -= 1
        script.append(("=", a[x]))
    script.reverse()
    return script
