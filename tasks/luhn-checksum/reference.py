def _digits(text: str) -> list[int] | None:
    stripped = text.replace(" ", "")
    if not all(c in "0123456789" for c in stripped):
        return None
    return [int(c) for c in stripped]


def _luhn_sum(digits: list[int]) -> int:
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2 == 1:
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
    return str((10 - _luhn_sum(digits + [0]) % 10) % 10)
