def _digits(text: str) -> list[int] | None:
    stripped = text.replace(" ", "")
    if not stripped.isdigit():
        return None
    return [int(c) for c in stripped]


def _luhn_sum(digits: list[int]) -> int:
    total = 0
    for position, digit in enumerate(digits):
        if position % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total


def luhn_valid(number: str) -> bool:
    digits = _digits(number)
    if digits is None or len(digits) < 2:
        return False
    return _luhn_sum(digits) % 10 == 0


def luhn_check_digit(partial: str) -> str:
    digits = _digits(partial)
    if not digits:
        raise ValueError("partial must contain digits and spaces only, at least one digit")
    for candidate in range(10):
        if _luhn_sum(digits + [candidate]) % 10 == 0:
            return str(candidate)
    raise AssertionError("unreachable")
