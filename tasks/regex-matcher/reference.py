SPECIAL_QUANTIFIERS = "*+?"


def _compile(pattern: str) -> tuple[list[tuple[str | None, str]], bool, bool]:
    """Return ([(char or None for '.', quantifier or '')], anchored_start, anchored_end)."""
    anchored_start = pattern.startswith("^")
    i = 1 if anchored_start else 0
    end = len(pattern)
    anchored_end = False
    if end > i and pattern[-1] == "$":
        backslashes = 0
        j = end - 2
        while j >= i and pattern[j] == "\\":
            backslashes += 1
            j -= 1
        if backslashes % 2 == 0:
            anchored_end = True
            end -= 1
    items: list[tuple[str | None, str]] = []
    can_quantify = False
    while i < end:
        ch = pattern[i]
        if ch in SPECIAL_QUANTIFIERS:
            if not can_quantify:
                raise ValueError(f"nothing to repeat at position {i}")
            items[-1] = (items[-1][0], ch)
            can_quantify = False
            i += 1
            continue
        if ch == "\\":
            if i + 1 >= end:
                raise ValueError("pattern ends with a lone backslash")
            items.append((pattern[i + 1], ""))
            i += 2
        else:
            items.append((None if ch == "." else ch, ""))
            i += 1
        can_quantify = True
    return items, anchored_start, anchored_end


class _Matcher:
    def __init__(self, items: list[tuple[str | None, str]], text: str, anchored_end: bool) -> None:
        self.items = items
        self.text = text
        self.anchored_end = anchored_end
        self.memo: dict[tuple[int, int], int] = {}

    def accepts(self, atom: str | None, ti: int) -> bool:
        if ti >= len(self.text):
            return False
        ch = self.text[ti]
        return ch != "\n" if atom is None else ch == atom

    def end_from(self, pi: int, ti: int) -> int:
        """End of the first match (in backtracking order) of items[pi:] at ti, or -1."""
        key = (pi, ti)
        if key in self.memo:
            return self.memo[key]
        if pi == len(self.items):
            result = ti if not self.anchored_end or ti == len(self.text) else -1
        else:
            atom, quantifier = self.items[pi]
            if quantifier == "":
                result = self.end_from(pi + 1, ti + 1) if self.accepts(atom, ti) else -1
            elif quantifier == "?":
                result = self.end_from(pi + 1, ti + 1) if self.accepts(atom, ti) else -1
                if result < 0:
                    result = self.end_from(pi + 1, ti)
            else:
                run = 0
                while self.accepts(atom, ti + run):
                    run += 1
                result = -1
                for count in range(run, (1 if quantifier == "+" else 0) - 1, -1):
                    result = self.end_from(pi + 1, ti + count)
                    if result >= 0:
                        break
        self.memo[key] = result
        return result


def search(pattern: str, text: str) -> tuple[int, int] | None:
    items, anchored_start, anchored_end = _compile(pattern)
    matcher = _Matcher(items, text, anchored_end)
    for start in range(0, 1 if anchored_start else len(text) + 1):
        end = matcher.end_from(0, start)
        if end >= 0:
            return start, end
    return None


def fullmatch(pattern: str, text: str) -> bool:
    items, _, _ = _compile(pattern)
    return _Matcher(items, text, anchored_end=True).end_from(0, 0) >= 0
