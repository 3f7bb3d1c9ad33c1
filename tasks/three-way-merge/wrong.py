def _pairing(a: list[str], b: list[str]) -> dict[int, int]:
    """Index in a -> index in b along a longest common subsequence."""
    n, m = len(a), len(b)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = table[i], table[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = below[j + 1] + 1 if a[i] == b[j] else max(below[j], row[j + 1])
    pairs = {}
    i = j = 0
    while i < n and j < m:
        if a[i] == b[j]:
            pairs[i] = j
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def merge3(
    base: list[str],
    ours: list[str],
    theirs: list[str],
    *,
    ours_label: str = "ours",
    theirs_label: str = "theirs",
    show_base: bool = False,
) -> tuple[list[str], int]:
    to_ours = _pairing(base, ours)
    to_theirs = _pairing(base, theirs)
    stable = [i for i in range(len(base)) if i in to_ours and i in to_theirs]
    # Sentinels at both ends turn "before the first" and "after the last" into ordinary chunks.
    anchors = [(-1, -1, -1)] + [(i, to_ours[i], to_theirs[i]) for i in stable]
    anchors.append((len(base), len(ours), len(theirs)))

    merged: list[str] = []
    conflicts = 0
    for (b0, o0, t0), (b1, o1, t1) in zip(anchors, anchors[1:]):
        b_part, o_part, t_part = base[b0 + 1 : b1], ours[o0 + 1 : o1], theirs[t0 + 1 : t1]
        if t_part == b_part:
            merged.extend(o_part)
        elif o_part == b_part:
            merged.extend(t_part)
        else:
            conflicts += 1
            merged.append("<<<<<<< " + ours_label)
            merged.extend(o_part)
            if show_base:
                merged.append("||||||| base")
                merged.extend(b_part)
            merged.append("=======")
            merged.extend(t_part)
            merged.append(">>>>>>> " + theirs_label)
        if b1 < len(base):
            merged.append(base[b1])
    return merged, conflicts
