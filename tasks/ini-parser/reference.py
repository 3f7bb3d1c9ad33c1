class ParseError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_ini(text: str) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    current = ""
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip()
            if not name:
                raise ParseError("empty section name", number)
            if name in result:
                raise ParseError(f"duplicate section {name!r}", number)
            result[name] = {}
            current = name
            continue
        if "=" not in line:
            raise ParseError(f"cannot parse {line!r}", number)
        key, value = line.split("=", 1)
        key, value = key.strip().lower(), value.strip()
        if not key:
            raise ParseError("empty key", number)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        section = result.setdefault(current, {})
        if key in section:
            raise ParseError(f"duplicate key {key!r}", number)
        section[key] = value
    return result
