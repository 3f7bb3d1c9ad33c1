import re
import string

SEPARATORS = "_- "
ALLOWED = set(string.ascii_letters + string.digits + SEPARATORS)


def split_words(name: str) -> list[str]:
    bad = set(name) - ALLOWED
    if bad:
        raise ValueError(f"unexpected character(s) in {name!r}")
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return re.split(r"[_\- ]+", spaced.strip("_- ")) if spaced.strip("_- ") else []


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:].lower()


def to_snake(name: str) -> str:
    return "_".join(w.lower() for w in split_words(name))


def to_kebab(name: str) -> str:
    return "-".join(w.lower() for w in split_words(name))


def to_camel(name: str) -> str:
    words = split_words(name)
    return "".join([w.lower() for w in words[:1]] + [_cap(w) for w in words[1:]])


def to_pascal(name: str) -> str:
    return "".join(_cap(w) for w in split_words(name))
