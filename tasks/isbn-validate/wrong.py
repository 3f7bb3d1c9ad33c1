def _normalise(code: str) -> str:
    return code.replace("-", "").replace(" ", "")


def _value(c: str) -> int | None:
    if c in "Xx":
        return 10
    if c in "0123456789":
        return int(c)
    return None


def _valid10(s: str) -> bool:
    if len(s) != 10:
        return False
    values = [_value(c) for c in s]
    if None in values:
        return False
    return sum((10 - i) * v for i, v in enumerate(values)) % 11 == 0


def _check13(first12: str) -> int:
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(first12))
    return (10 - total % 10) % 10


def _valid13(s: str) -> bool:
    return len(s) == 13 and s.isdigit() and _check13(s[:12]) == int(s[12])


def isbn_valid(code: str) -> bool:
    s = _normalise(code)
    return _valid10(s) or _valid13(s)


def isbn10_to_13(code: str) -> str:
    s = _normalise(code)
    if not _valid10(s):
        raise ValueError(f"not a valid ISBN-10: {code!r}")
    first12 = "978" + s[:9]
    return first12 + str(_check13(first12))
