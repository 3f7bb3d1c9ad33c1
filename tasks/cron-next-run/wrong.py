import re
from datetime import datetime, timedelta

MONTHS = {name: i for i, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
DAYS = {name: i for i, name in enumerate("sun mon tue wed thu fri sat".split())}
# (low, high, names) per field: minute, hour, day of month, month, day of week.
FIELDS = [(0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, MONTHS), (0, 7, DAYS)]
_ITEM = re.compile(r"(\*|\w+)(?:-(\w+))?(?:/(\d+))?")
SEARCH_YEARS = 10


def _value(token: str, low: int, high: int, names: dict[str, int]) -> int:
    if token.isdigit():
        value = int(token)
    elif token.lower() in names:
        value = names[token.lower()]
    else:
        raise ValueError(f"bad value {token!r}")
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}-{high}")
    return value


def _parse_field(text: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if not match:
            raise ValueError(f"bad item {item!r}")
        base, end, step = match.groups()
        if base == "*":
            if end is not None:
                raise ValueError(f"bad item {item!r}")
            start, stop = low, high
        else:
            start = _value(base, low, high, names)
            if end is not None:
                stop = _value(end, low, high, names)
            else:
                stop = high if step is not None else start
        if start > stop:
            raise ValueError(f"empty range {item!r}")
        stride = int(step) if step is not None else 1
        if stride == 0:
            raise ValueError("step must be positive")
        values.update(range(start, stop + 1, stride))
    return values


class Cron:
    def __init__(self, expr: str) -> None:
        fields = expr.split()
        if len(fields) != 5:
            raise ValueError(f"expected 5 fields, got {len(fields)}")
        parsed = [_parse_field(text, *spec) for text, spec in zip(fields, FIELDS)]
        self.minutes, self.hours, self.days, self.months, weekdays = parsed
        self.weekdays = {d % 7 for d in weekdays}
        self.days_restricted = not fields[2].startswith("*")
        self.weekdays_restricted = not fields[4].startswith("*")

    def _day_matches(self, when: datetime) -> bool:
        by_day = when.day in self.days
        by_weekday = (when.weekday() + 1) % 7 in self.weekdays
        return by_day and by_weekday

    def matches(self, when: datetime) -> bool:
        return (
            when.minute in self.minutes
            and when.hour in self.hours
            and when.month in self.months
            and self._day_matches(when)
        )

    def next_after(self, when: datetime) -> datetime:
        t = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit_year = when.year + SEARCH_YEARS
        while t.year <= limit_year:
            if t.month not in self.months:
                t = datetime(t.year + (t.month == 12), t.month % 12 + 1, 1)
            elif not self._day_matches(t):
                t = datetime(t.year, t.month, t.day) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = datetime(t.year, t.month, t.day, t.hour) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                later = [m for m in self.minutes if m > t.minute]
                if later:
                    t = t.replace(minute=min(later))
                else:
                    t = datetime(t.year, t.month, t.day, t.hour) + timedelta(hours=1)
            else:
                return t
        raise ValueError("the expression never fires")
