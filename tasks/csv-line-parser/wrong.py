def _check_delimiter(delimiter: str) -> None:
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"invalid delimiter {delimiter!r}")


def parse_record(line: str, delimiter: str = ",") -> list[str]:
    _check_delimiter(delimiter)
    fields: list[str] = []
    current: list[str] = []
    in_quotes = False
    was_quoted = False
    i = 0
    while i < len(line):
        ch = line[i]
        if in_quotes:
            if ch == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    current.append('"')
                    i += 1
                else:
                    in_quotes = False
            else:
                current.append(ch)
        elif ch == '"':
            if current or was_quoted:
                raise ValueError("stray quote")
            in_quotes = was_quoted = True
        elif ch == delimiter:
            fields.append("".join(current))
            current, was_quoted = [], False
        else:
            if was_quoted:
                raise ValueError("text after closing quote")
            current.append(ch)
        i += 1
    if in_quotes:
        raise ValueError("unterminated quoted field")
    if current or was_quoted or not fields:
        fields.append("".join(current))
    return fields


def format_record(fields: list[str], delimiter: str = ",") -> str:
    _check_delimiter(delimiter)
    if not fields:
        raise ValueError("cannot format an empty record")
    out = []
    for field in fields:
        if any(c in field for c in (delimiter, '"', "\r", "\n")):
            out.append('"' + field.replace('"', '""') + '"')
        else:
            out.append(field)
    return delimiter.join(out)
