import re
from dataclasses import dataclass, field
from functools import total_ordering

_NUM = r"0|[1-9][0-9]*"
_IDENT = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    rf"(?:\+({_IDENT}(?:\.{_IDENT})*))?"
)


def _prerelease_key(pre: tuple[int | str, ...]) -> tuple:
    # A release sorts after all of its prereleases, so it gets a key that beats any identifier tuple.
    if not pre:
        return (1,)
    return (0, tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in pre))


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()
    build: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, text: str) -> "Version":
        match = _PATTERN.fullmatch(text)
        if not match:
            raise ValueError(f"not a semantic version: {text!r}")
        major, minor, patch, pre, build = match.groups()
        prerelease: list[int | str] = []
        for ident in pre.split(".") if pre else []:
            if ident.isdigit():
                if len(ident) > 1 and ident[0] == "0":
                    raise ValueError(f"numeric prerelease identifier with leading zero: {ident!r}")
                prerelease.append(int(ident))
            else:
                prerelease.append(ident)
        return cls(int(major), int(minor), int(patch), tuple(prerelease), tuple(build.split(".")) if build else ())

    def _key(self) -> tuple:
        return (self.major, self.minor, self.patch, _prerelease_key(self.prerelease))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(p) for p in self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return False
        return self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())
