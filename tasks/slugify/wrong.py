import re
import unicodedata


def slugify(text: str, *, max_length: int | None = None, separator: str = "-") -> str:
    if max_length is not None and max_length < 1:
        raise ValueError("max_length must be >= 1")
    if len(separator) != 1 or not separator.isascii() or separator.isalnum():
        raise ValueError("separator must be one ASCII character that is not a letter or digit")
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", separator, ascii_text.lower().replace("'", "")).strip(separator)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug
