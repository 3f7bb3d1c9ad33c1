import re
import unicodedata


def slugify(text: str, *, max_length: int | None = None, separator: str = "-") -> str:
    if max_length is not None and max_length < 1:
        raise ValueError("max_length must be >= 1")
    if len(separator) != 1 or not separator.isascii() or separator.isalnum():
        raise ValueError("separator must be one ASCII character that is not a letter or digit")
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = [w for w in re.split(r"[^a-z0-9]+", ascii_text.lower().replace("'", "")) if w]
    if max_length is None:
        return separator.join(words)
    if words and len(words[0]) > max_length:
        return words[0][:max_length]
    kept: list[str] = []
    length = -1  # the first word needs no separator in front
    for word in words:
        if length + 1 + len(word) > max_length:
            break
        kept.append(word)
        length += 1 + len(word)
    return separator.join(kept)
