import re
from math import gcd

_PARSE = re.compile(r"\s*([+-]?\d+)(?:/(\d+))?\s*")


def _coerce(value: object) -> "Rational | None":
    if isinstance(value, Rational):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Rational(value)
    return None


class Rational:
    __slots__ = ("_n", "_d")

    def __init__(self, numerator: int, denominator: int = 1) -> None:
        for part in (numerator, denominator):
            if not isinstance(part, int) or isinstance(part, bool):
                raise TypeError(f"Rational needs int parts, got {type(part).__name__}")
        if denominator == 0:
            raise ZeroDivisionError("zero denominator")
        if denominator < 0:
            numerator, denominator = -numerator, -denominator
        g = gcd(numerator, denominator)
        object.__setattr__(self, "_n", numerator // g)
        object.__setattr__(self, "_d", denominator // g)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Rational is immutable")

    @property
    def numerator(self) -> int:
        return self._n

    @property
    def denominator(self) -> int:
        return self._d

    @classmethod
    def parse(cls, text: str) -> "Rational":
        match = _PARSE.fullmatch(text)
        if not match:
            raise ValueError(f"not a rational: {text!r}")
        return cls(int(match.group(1)), int(match.group(2)) if match.group(2) else 1)

    def __add__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return Rational(self._n * o._d + o._n * self._d, self._d * o._d)

    __radd__ = __add__

    def __sub__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return Rational(self._n * o._d - o._n * self._d, self._d * o._d)

    def __rsub__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return o - self

    def __mul__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return Rational(self._n * o._n, self._d * o._d)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        if o._n == 0:
            raise ZeroDivisionError("division by zero")
        return Rational(self._n * o._d, self._d * o._n)

    def __rtruediv__(self, other: object) -> "Rational":
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return o / self

    def __pow__(self, exponent: object) -> "Rational":
        if not isinstance(exponent, int) or isinstance(exponent, bool):
            return NotImplemented
        if exponent < 0:
            if self._n == 0:
                raise ZeroDivisionError("zero to a negative power")
            return Rational(self._d ** -exponent, self._n ** -exponent)
        return Rational(self._n**exponent, self._d**exponent)

    def __neg__(self) -> "Rational":
        return Rational(-self._n, self._d)

    def __abs__(self) -> "Rational":
        return Rational(abs(self._n), self._d)

    def __eq__(self, other: object) -> bool:
        o = _coerce(other)
        if o is None:
            return False
        return self._n == o._n and self._d == o._d

    def _cmp(self, other: object) -> int | None:
        o = _coerce(other)
        if o is None:
            return None
        left, right = self._n * o._d, o._n * self._d
        return (left > right) - (left < right)

    def __lt__(self, other: object) -> bool:
        c = self._cmp(other)
        return NotImplemented if c is None else c < 0

    def __le__(self, other: object) -> bool:
        c = self._cmp(other)
        return NotImplemented if c is None else c <= 0

    def __gt__(self, other: object) -> bool:
        c = self._cmp(other)
        return NotImplemented if c is None else c > 0

    def __ge__(self, other: object) -> bool:
        c = self._cmp(other)
        return NotImplemented if c is None else c >= 0

    def __hash__(self) -> int:
        return hash(self._n) if self._d == 1 else hash((self._n, self._d))

    def __float__(self) -> float:
        return self._n / self._d

    def __bool__(self) -> bool:
        return self._n != 0

    def __str__(self) -> str:
        return str(self._n) if self._d == 1 else f"{self._n}/{self._d}"

    def __repr__(self) -> str:
        return f"Rational({self._n}, {self._d})"

    def decimal(self) -> str:
        sign = "-" if self._n < 0 else ""
        whole, remainder = divmod(abs(self._n), self._d)
        if remainder == 0:
            return f"{sign}{whole}"
        digits: list[str] = []
        seen: dict[int, int] = {}
        while remainder and remainder not in seen:
            seen[remainder] = len(digits)
            digit, remainder = divmod(remainder * 10, self._d)
            digits.append(str(digit))
        if remainder:
            start = seen[remainder]
            fraction = "".join(digits[:start]) + "(" + "".join(digits[start:]) + ")"
        else:
            fraction = "".join(digits)
        return f"{sign}{whole}.{fraction}"
