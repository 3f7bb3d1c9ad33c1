MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
MAX_YEAR = 100_000


def _check_year(year: int) -> None:
    if not 1 <= year <= MAX_YEAR:
        raise ValueError(f"year must be in 1..{MAX_YEAR}, got {year}")


def is_leap(year: int) -> bool:
    _check_year(year)
    return year % 4 == 0 and year % 100 != 0


def _month_lengths(year: int) -> list[int]:
    lengths = list(MONTH_DAYS)
    if is_leap(year):
        lengths[1] = 29
    return lengths


def day_of_year(year: int, month: int, day: int) -> int:
    lengths = _month_lengths(year)
    if not 1 <= month <= 12:
        raise ValueError(f"month must be in 1..12, got {month}")
    if not 1 <= day <= lengths[month - 1]:
        raise ValueError(f"day must be in 1..{lengths[month - 1]} for {year}-{month:02d}, got {day}")
    return sum(lengths[: month - 1]) + day


def from_day_of_year(year: int, ordinal: int) -> tuple[int, int]:
    lengths = _month_lengths(year)
    if not 1 <= ordinal <= sum(lengths):
        raise ValueError(f"ordinal must be in 1..{sum(lengths)} for {year}, got {ordinal}")
    for month, length in enumerate(lengths, start=1):
        if ordinal <= length:
            return month, ordinal
        ordinal -= length
    raise AssertionError("unreachable")


def _days_since_epoch(date: tuple[int, int, int]) -> int:
    year, month, day = date
    previous = year - 1
    return previous * 365 + previous // 4 - previous // 100 + previous // 400 + day_of_year(year, month, day)


def days_between(start: tuple[int, int, int], end: tuple[int, int, int]) -> int:
    return _days_since_epoch(end) - _days_since_epoch(start)
