SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = ["", "thousand", "million", "billion", "trillion"]
LIMIT = 10**15


def _below_thousand(n: int) -> list[str]:
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [SMALL[hundreds], "hundred"]
    if rest >= 20:
        tens, units = divmod(rest, 10)
        words.append(TENS[tens] + (f"-{SMALL[units]}" if units else ""))
    elif rest:
        words.append(SMALL[rest])
    return words


def to_words(n: int) -> str:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"expected int, got {type(n).__name__}")
    if abs(n) >= LIMIT:
        raise ValueError(f"{n} is out of range")
    if n == 0:
        return "zero"
    words: list[str] = []
    remaining = abs(n)
    for scale in SCALES:
        remaining, group = divmod(remaining, 1000)
        if group:
            words = _below_thousand(group) + ([scale] if scale else []) + words
        if not remaining:
            break
    return ("minus " if n < 0 else "") + " ".join(words)


_VALUES = {word: i for i, word in enumerate(SMALL)}
_VALUES.update({word: 10 * i for i, word in enumerate(TENS) if i >= 2})


def from_words(text: str) -> int:
    words = text.lower().split()
    if not words:
        raise ValueError("no number")
    sign = 1
    if words[0] == "minus":
        sign, words = -1, words[1:]
    total = group = 0
    for word in words:
        if word in SCALES[1:]:
            total += group * 1000 ** SCALES.index(word)
            group = 0
        elif word == "hundred":
            group *= 100
        else:
            tens, _, units = word.partition("-")
            if tens not in _VALUES or (units and units not in _VALUES):
                raise ValueError(f"unknown word {word!r}")
            group += _VALUES[tens] + (_VALUES[units] if units else 0)
    value = sign * (total + group)
    # Lenient accumulation above; the canonical round trip rejects every malformed spelling.
    try:
        canonical = to_words(value)
    except ValueError:
        raise ValueError(f"not a canonical number: {text!r}") from None
    if canonical != " ".join(text.lower().split()):
        raise ValueError(f"not a canonical number: {text!r}")
    return value
