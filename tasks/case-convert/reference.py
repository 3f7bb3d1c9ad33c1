import string

SEPARATORS = "_- "
ALLOWED = set(string.ascii_letters + string.digits + SEPARATORS)


def split_words(name: str) -> list[str]:
    bad = set(name) - ALLOWED
    if bad:
        raise ValueError(f"unexpected character(s) in {name!r}: {''.join(sorted(bad))!r}")
    words: list[str] = []
    for piece in name.replace("-", " ").replace("_", " ").split():
        start = 0
        for i in range(1, len(piece)):
            prev, char = piece[i - 1], piece[i]
            if not char.isupper():
                continue
            after_lower_or_digit = prev.islower() or prev.isdigit()
            acronym_end = prev.isupper() and i + 1 < len(piece) and piece[i + 1].islower()
            if after_lower_or_digit or acronym_end:
                words.append(piece[start:i])
                start = i
        words.append(piece[start:])
    return words


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
