from collections.abc import Mapping

_HEX = "0123456789abcdefABCDEF"
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _decode(text: str) -> str:
    text = text.replace("+", " ")
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%":
            pair = text[i + 1 : i + 3]
            if len(pair) != 2 or any(c not in _HEX for c in pair):
                raise ValueError(f"bad percent escape at {i}: {text[i:i + 3]!r}")
            out.append(int(pair, 16))
            i += 3
        else:
            out += ch.encode("utf-8")
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"not valid UTF-8 after decoding: {error}") from None


def parse_query(query: str) -> dict[str, list[str]]:
    if query.startswith("?"):
        query = query[1:]
    result: dict[str, list[str]] = {}
    for piece in query.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        result.setdefault(_decode(name), []).append(_decode(value))
    return result


def _encode(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    return "".join(
        chr(b) if b in _SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in text.encode("utf-8")
    )


def build_query(params: Mapping[str, str | list[str]]) -> str:
    pairs = []
    for name, value in params.items():
        if isinstance(value, str):
            values = [value]
        elif isinstance(value, (list, tuple)):
            values = list(value)
        else:
            raise TypeError(f"value of {name!r} must be str or list of str")
        pairs.extend(f"{_encode(name)}={_encode(v)}" for v in values)
    return "&".join(pairs)
