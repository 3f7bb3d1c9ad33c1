DIGITS = "0123456789"


def _normalise(code: str) -> str:
    return code.replace("-", "").replace(" ", "")


def _valid10(s: str) -> bool:
    if len(s) != 10 or not all(c in DIGITS for c in s[:9]):
        return False
    last = s[9]
    if last in "Xx":
        last_value = 10
    elif last in DIGITS:
        last_value = int(last)
    else:
        return False
    total = sum((10 - i) * int(c) for i, c in enumerate(s[:9])) + last_value
    return total % 11 == 0


def _check13(first12: str) -> int:
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(first12))
    return (10 - total % 10) % 10


def _valid13(s: str) -> bool:
    return len(s) == 13 and all(c in DIGITS for c in s) and _check13(s[:12]) == int(s[12])


def isbn_valid(code: str) -> bool:
    s = _normalise(code)
    return _valid10(s) or _valid13(s)


def isbn10_to_13(code: str) -> str:
    s = _normalise(code)
    if not _valid10(s):
        raise ValueError(f"not a valid ISBN-10: {code!r}")
    first12 = "978" + s[:9]
    return first12 + str(_check13(first12))
